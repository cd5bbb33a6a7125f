"""chatfold against its Python peers, on the same inputs, in one run.

    pip install chatcram rollmem tiktoken
    python3 benches/peers/compare.py [--quick]

The inputs come from chatfold's seeded generator (benches/support/history.rs,
through the driver benches/peers/driver.rs), written to a temporary folder and
read by both sides. Runs alternate (chatfold, peer, chatfold, peer ...), and
the table shows medians and ratios. Python tiktoken needs its vocabulary
files; they are taken from tiktoken-rs's bundled copies (offline), under the
names tiktoken looks for (the SHA-1 of their download address).

What is timed:
- compact: one compaction (budget 8000, keep_recent 4000, a summarizer that
  returns a fixed string), the encoder built before timing on both sides;
  chatcram's `Compactor.compact` against chatfold's `Compactor::compact`,
  with its identifier ledger (the default) and without (what the peers do).
- command: the whole process on the same file, from start to exit:
  `chatfold compact --budget 8000 --keep-recent 4000 --tokenizer o200k_base
  --summarize-cmd 'echo ...'` against a Python process that does chatcram's
  `json.load` and `compact` with tiktoken o200k and writes the result.
- rolling: 10 000 adds to a rolling memory (max_tokens 4000, a constant
  summarizer, the word-count token counter on both sides), rollmem's
  `RollingMemory.add_message` against chatfold's `RollingMemory::add_message`.
- ledger on / off: chatfold against itself, the ledger on (the default) and
  off, interleaved in one process (`peer_driver pair`: compactions
  alternate one by one, rolling memories take turns in blocks of 100 adds).
  The machine's speed drifts by up to 1.5x within milliseconds, so the
  fresh-process rows above give on / off ratios that move from run to run;
  these hold. Each is the median over processes of the ratio of medians
  (compact) or of totals (rolling).
- chatfold at its defaults, which no peer has (they take a summarizer):
  the whole command with the built-in summarizer (`chatfold compact
  --budget 8000 FILE`, o200k, no `--summarize-cmd`), and the paired rolling
  memory with the built-in summarizer (`CHATFOLD_SUMMARIZER=extractive`).
"""

import glob
import hashlib
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def target_dir():
    """Where cargo builds (CARGO_TARGET_DIR and config included), as cargo says."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return pathlib.Path(json.loads(out.stdout)["target_directory"])


TARGET = target_dir()
URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def tiktoken_cache(folder):
    """Fills `folder` with tiktoken-rs's vocabularies under tiktoken's cache names."""
    home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    found = sorted(glob.glob(str(home / "registry/src/*/tiktoken-rs-*/assets")))
    if not found:
        sys.exit("tiktoken-rs's sources are not in the cargo registry: run `cargo build` first")
    for name in ["o200k_base", "cl100k_base"]:
        key = hashlib.sha1(URL.format(name).encode()).hexdigest()
        shutil.copy(pathlib.Path(found[-1]) / f"{name}.tiktoken", pathlib.Path(folder) / key)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


def driver(*args, ledger=True, extractive=False):
    exe = TARGET / "release/examples/peer_driver"
    env = dict(os.environ)
    if not ledger:
        env["CHATFOLD_NO_LEDGER"] = "1"
    if extractive:
        env["CHATFOLD_SUMMARIZER"] = "extractive"
    out = subprocess.run([str(exe), *map(str, args)], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout) if out.stdout.strip() else None


def chatcram_compact(messages, tokenizer_name):
    from chatcram import Compactor
    from chatcram.tokenizers import HeuristicTokenizer, tiktoken_tokenizer

    tokenizer = HeuristicTokenizer() if tokenizer_name == "heuristic" else tiktoken_tokenizer("gpt-4o")
    tokenizer.count("warm up: the encoder is built here")
    # chatcram reads "content" as text; tool-call messages have none.
    plain = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
    compactor = Compactor(budget=8000, summarize=lambda transcript: "fixed summary", keep_recent=4000, tokenizer=tokenizer)

    def run():
        start = time.perf_counter()
        compactor.compact(plain)
        return time.perf_counter() - start

    return run


CHATCRAM_SCRIPT = r"""
import json, sys
from chatcram import Compactor
from chatcram.tokenizers import tiktoken_tokenizer
messages = json.load(open(sys.argv[1]))
plain = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
compactor = Compactor(budget=8000, summarize=lambda t: "fixed summary", keep_recent=4000, tokenizer=tiktoken_tokenizer("gpt-4o"))
json.dump(compactor.compact(plain).messages, sys.stdout)
"""


def whole_process(path):
    """Wall time of each side's whole process on `path`: (chatfold, chatcram)."""
    ours = [str(TARGET / "release/chatfold"), "compact", "--budget", "8000", "--keep-recent", "4000"]
    ours += ["--tokenizer", "o200k_base", "--summarize-cmd", "echo fixed summary", str(path)]
    theirs = [sys.executable, "-c", CHATCRAM_SCRIPT, str(path)]
    times = []
    for command in [ours, theirs]:
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def default_command(path):
    """Wall time of `chatfold compact --budget 8000 FILE` at its defaults (the built-in summarizer)."""
    command = [str(TARGET / "release/chatfold"), "compact", "--budget", "8000", str(path)]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def rollmem_adds(messages, adds):
    from rollmem import RollingMemory, ToolCall

    turns = []
    for i in range(adds):
        m = messages[i % len(messages)]
        calls = [ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"]) for c in m.get("tool_calls", [])]
        turns.append((m["role"], m.get("content") or "", calls, m.get("tool_call_id")))

    def run():
        memory = RollingMemory(max_tokens=4000, summarize_fn=lambda summary, folded: "fixed summary")
        stamps = [time.perf_counter()]
        full_at = None
        for i, (role, content, calls, call_id) in enumerate(turns):
            before = memory.summary
            memory.add_message(role, content, tool_calls=calls, tool_call_id=call_id)
            if full_at is None and memory.summary != before:
                full_at = i
            stamps.append(time.perf_counter())
        full_at = full_at or 0
        first = stamps[min(full_at + 1000, adds)] - stamps[full_at]
        last = stamps[adds] - stamps[adds - 1000]
        return {"total_s": stamps[-1] - stamps[0], "first_1000_after_full_s": first, "last_1000_s": last}

    return run


def ledger_ratios(tmp, sizes, rolling_path, adds):
    """Rows (label, on_s, off_s, ratio) of `peer_driver pair`, three processes each."""
    rows = []
    for n in sizes:
        path = pathlib.Path(tmp) / f"history-{n}.json"
        # About a third of a second a process.
        reps = {1_000: 300, 10_000: 100}.get(n, 7)
        for tokenizer in ["heuristic", "o200k_base"]:
            runs = [driver("pair", "compact", path, 8000, 4000, tokenizer, reps) for _ in range(3)]
            on = [median(r["on_s"]) for r in runs]
            off = [median(r["off_s"]) for r in runs]
            ratio = median([a / b for a, b in zip(on, off)])
            rows.append((f"compact {n:>7} msgs, {tokenizer}", median(on), median(off), ratio))
    runs = [driver("pair", "rolling", rolling_path, adds, 4000) for _ in range(3)]
    ratio = median([r["on_s"] / r["off_s"] for r in runs])
    rows.append(("rolling 10 000 adds, total", median([r["on_s"] for r in runs]), median([r["off_s"] for r in runs]), ratio))
    return rows


def median(xs):
    return statistics.median(xs)


def main():
    quick = "--quick" in sys.argv
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "peer_driver"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--features", "cli"], cwd=ROOT, check=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print(f"machine: {cpu}, {os.cpu_count()} cores; Python {platform.python_version()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tiktoken_cache(tmp)
        sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
        for n in sizes:
            path = pathlib.Path(tmp) / f"history-{n}.json"
            driver("gen", n, 42, path)
            messages = json.loads(path.read_text())
            size_mb = path.stat().st_size / 1e6
            for tokenizer in ["heuristic", "o200k_base"]:
                reps = 3 if n >= 100_000 else 7
                ours, bare, theirs = [], [], []
                peer = chatcram_compact(messages, tokenizer)
                for _ in range(reps):
                    ours.append(median(driver("compact", path, 8000, 4000, tokenizer, 3)["times_s"]))
                    bare.append(median(driver("compact", path, 8000, 4000, tokenizer, 3, ledger=False)["times_s"]))
                    theirs.append(peer())
                label = f"compact {n:>7} msgs ({size_mb:.1f} MB), {tokenizer}"
                rows.append((label, median(theirs), median(ours)))
                rows.append((label + ", no ledger", median(theirs), median(bare)))
            runs = [whole_process(path) for _ in range(3 if n >= 100_000 else 5)]
            rows.append((f"command {n:>7} msgs, o200k, whole process", median([r[1] for r in runs]), median([r[0] for r in runs])))
        adds = 10_000
        path = pathlib.Path(tmp) / "history-10000.json"
        messages = json.loads(path.read_text())
        peer = rollmem_adds(messages, adds)
        ours, bare, theirs = [], [], []
        for _ in range(3 if quick else 5):
            ours.append(driver("rolling", path, adds, 4000))
            bare.append(driver("rolling", path, adds, 4000, ledger=False))
            theirs.append(peer())
        for runs, suffix in [(ours, ""), (bare, ", no ledger")]:
            for key, label in [
                ("total_s", "rolling 10 000 adds, total"),
                ("first_1000_after_full_s", "rolling: first 1 000 adds after full"),
                ("last_1000_s", "rolling: last 1 000 adds"),
            ]:
                rows.append((label + suffix, median([t[key] for t in theirs]), median([o[key] for o in runs])))
        paired = ledger_ratios(tmp, sizes, path, adds)
        defaults = []
        for n in sizes:
            runs = [default_command(pathlib.Path(tmp) / f"history-{n}.json") for _ in range(1 if n >= 100_000 else 5)]
            defaults.append((f"command {n:>7} msgs, built-in summarizer", median(runs)))
        runs = [driver("pair", "rolling", path, adds, 4000, extractive=True) for _ in range(3)]
        on, off = median([r["on_s"] for r in runs]), median([r["off_s"] for r in runs])
        built_in = ("rolling 10 000 adds, built-in summarizer", on, off, median([r["on_s"] / r["off_s"] for r in runs]))
    print(f"\n{'what':<52} {'peer (median)':>14} {'chatfold':>12} {'ratio':>9}")
    for label, peer_s, ours_s in rows:
        print(f"{label:<52} {peer_s * 1e3:>11.2f} ms {ours_s * 1e3:>9.3f} ms {peer_s / ours_s:>8.0f}x")
    flat_peer = rows[-1][1] / rows[-2][1]
    flat_ours = rows[-4][2] / rows[-5][2]
    flat_bare = rows[-1][2] / rows[-2][2]
    print(
        f"\nlast / first 1 000 adds after full: rollmem {flat_peer:.2f}, chatfold {flat_ours:.2f},"
        f" chatfold without the ledger {flat_bare:.2f}"
    )
    print(f"\n{'ledger on / off, interleaved in one process':<52} {'on':>12} {'off':>12} {'ratio':>7}")
    for label, on, off, ratio in paired + [built_in]:
        print(f"{label:<52} {on * 1e3:>9.3f} ms {off * 1e3:>9.3f} ms {ratio:>6.2f}x")
    print(f"\n{'chatfold at its defaults (no peer has a summarizer)':<52} {'chatfold':>12}")
    for label, ours_s in defaults:
        print(f"{label:<52} {ours_s * 1e3:>9.1f} ms")


if __name__ == "__main__":
    main()
