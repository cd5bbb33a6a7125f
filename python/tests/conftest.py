"""Shared fixtures: tiktoken (for the chatcram comparisons) reads the
vocabularies tiktoken-rs ships, so nothing is downloaded; a redis-server of
the tests' own."""

import glob
import hashlib
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def _tiktoken_cache() -> None:
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    found = sorted(glob.glob(str(home / "registry/src/*/tiktoken-rs-*/assets")))
    if not found:
        return
    folder = tempfile.mkdtemp(prefix="chatfold-tiktoken-")
    for name in ["o200k_base", "cl100k_base"]:
        key = hashlib.sha1(URL.format(name).encode()).hexdigest()
        shutil.copy(pathlib.Path(found[-1]) / f"{name}.tiktoken", pathlib.Path(folder) / key)
    os.environ["TIKTOKEN_CACHE_DIR"] = folder


_tiktoken_cache()


def _redis_server():
    """A redis-server of its own on a free loopback port, or None."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    return None, None


def redis_unavailable(reason):
    """Fails (CHATFOLD_REQUIRE_REDIS=1, as in CI) or skips a Redis test."""
    if os.environ.get("CHATFOLD_REQUIRE_REDIS") == "1":
        pytest.fail(f"{reason}, and CHATFOLD_REQUIRE_REDIS=1 requires the Redis tests")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def redis_url():
    """A redis-server of the module's own on a free loopback port."""
    try:
        import redis  # noqa: F401
    except ImportError:
        redis_unavailable("the redis package is not installed")
    proc, port = _redis_server()
    if proc is None:
        redis_unavailable("no redis-server, or it did not start")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait()
