"""Shared fixtures: tiktoken (for the chatcram comparisons) reads the
vocabularies tiktoken-rs ships, so nothing is downloaded."""

import glob
import hashlib
import os
import pathlib
import shutil
import tempfile

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
