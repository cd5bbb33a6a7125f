"""The Python package against the packages it replaces, in one run.

    python benches/python/bench.py [--quick]

Needs the chatfold package (a release build: `pip install ./python`),
rollmem 0.6.0, chatcram 0.1.0 and tiktoken in the same environment. Each
comparison alternates the two sides, repeats, and prints the medians and
their ratio; the numbers go into BENCHMARKS.md.
"""

import asyncio
import glob
import hashlib
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def tiktoken_cache():
    """tiktoken reads tiktoken-rs's vocabularies under tiktoken's cache names."""
    home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    found = sorted(glob.glob(str(home / "registry/src/*/tiktoken-rs-*/assets")))
    if not found:
        sys.exit("tiktoken-rs's sources are not in the cargo registry: run `cargo build` first")
    folder = tempfile.mkdtemp(prefix="chatfold-bench-")
    for name in ["o200k_base", "cl100k_base"]:
        key = hashlib.sha1(URL.format(name).encode()).hexdigest()
        shutil.copy(pathlib.Path(found[-1]) / f"{name}.tiktoken", pathlib.Path(folder) / key)
    os.environ["TIKTOKEN_CACHE_DIR"] = folder


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def compare(label, ours, theirs, rounds):
    """Alternates the two sides `rounds` times; prints medians and the ratio."""
    a, b = [], []
    for _ in range(rounds):
        a.append(timed(ours))
        b.append(timed(theirs))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{label}: chatfold {ma * 1e3:.2f} ms, original {mb * 1e3:.2f} ms, {mb / ma:.1f}x")
    return ma, mb


def summarize(summary, messages):
    return (summary[-200:] + " " + " ".join(m.content[:20] for m in messages)).strip()


def rolling_adds(module, n):
    def run():
        memory = module.RollingMemory(2000, summarize)
        for i in range(n):
            memory.add_user_message(f"user turn {i}: what should I see in Seoul on day {i}?")
            memory.add_assistant_message(f"On day {i}, visit Gyeongbokgung Palace and Bukchon.")

    return run


def history(n):
    out = [{"role": "system", "content": "You are a travel agent."}]
    for i in range(n):
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"Day {i}: what should I see in Seoul? Gyeongbokgung, Bukchon, Namsan, item {i}."})
    return out


def crossing_cost(rounds):
    import chatfold

    memory = chatfold.BufferMemory()
    message = {"role": "user", "content": "hi"}
    n = 100_000
    times = []
    for _ in range(rounds):
        memory.clear()
        times.append(timed(lambda: [memory.add_message(message) for _ in range(n)]) / n)
    add = statistics.median(times)
    raw = chatfold._chatfold.SyncMemory("buffer")
    times = []
    for _ in range(rounds):
        raw.clear()
        times.append(timed(lambda: [raw.add_message(message) for _ in range(n)]) / n)
    print(f"crossing into Rust: {statistics.median(times) * 1e9:.0f} ns per call (a one-message add to a buffer memory); {add * 1e9:.0f} ns through the Python class")
    count = chatfold.count_tokens
    times = [timed(lambda: [count([message], "heuristic") for _ in range(n)]) / n for _ in range(rounds)]
    print(f"count_tokens of one message: {statistics.median(times) * 1e9:.0f} ns per call")


def percentiles(times):
    times = sorted(times)
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def tiered_adds(n):
    """TieredMemory.add_message with a 50 ms async summarizer folding in the
    background: (p50, p99) in seconds."""
    import chatfold

    async def slow(request):
        await asyncio.sleep(0.05)
        return f"{len(request)} turns folded"

    async def main():
        memory = chatfold.TieredMemory(1000, 2500, slow, chunk_size=4)
        times = []
        async with memory:
            for i in range(n):
                start = time.perf_counter()
                memory.add_user(f"turn {i}: read /srv/data/file-{i}.csv and report")
                times.append(time.perf_counter() - start)
                await asyncio.sleep(0)  # the agent loop awaits something: the worker runs
        return percentiles(times)

    return asyncio.run(main())


def sawtooth_adds(n):
    """sawtooth-memory's ContextManager.add_message (its defaults: soft 1000,
    hard 2500, chunks of 4), its compressor replaced by the same 50 ms async
    summarizer, in always_llm mode so that it is called."""
    import logging

    from sawtooth_memory import ContextManager, ContextManagerConfig
    from sawtooth_memory import compressor

    logging.disable(logging.CRITICAL)  # its truncation warnings, once per add

    async def compress(self, messages_text, *, protected_entities=None):
        await asyncio.sleep(0.05)
        return {"narrative_summary": f"{len(messages_text)} characters folded", "extracted_entities": {}}

    async def ping(self):
        return None

    compressor.OllamaCompressor.compress = compress
    compressor.OllamaCompressor.ping = ping

    async def main():
        config = ContextManagerConfig(compression_mode="always_llm")
        times = []
        journal = pathlib.Path(tempfile.mkdtemp(prefix="chatfold-bench-")) / "journal.jsonl"
        async with ContextManager("You are helpful.", config, journal_path=journal) as cm:
            for i in range(n):
                start = time.perf_counter()
                await cm.add_message("user", f"turn {i}: read /srv/data/file-{i}.csv and report")
                times.append(time.perf_counter() - start)
                await asyncio.sleep(0)
        return percentiles(times)

    return asyncio.run(main())


def tiered_against_sawtooth(n, rounds):
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(tiered_adds(n))
        theirs.append(sawtooth_adds(n))
    (p50a, p99a), (p50b, p99b) = [tuple(statistics.median(x[i] for x in side) for i in (0, 1)) for side in (ours, theirs)]
    print(
        f"tiered adds ({n}, 50 ms async summarizer): chatfold p50 {p50a * 1e6:.1f} us p99 {p99a * 1e6:.1f} us; "
        f"sawtooth add_message p50 {p50b * 1e6:.1f} us p99 {p99b * 1e6:.1f} us; p99 {p99b / p99a:.1f}x lower"
    )


def main():
    quick = "--quick" in sys.argv
    tiktoken_cache()
    import chatcram
    import rollmem
    from chatcram.tokenizers import tiktoken_tokenizer as their_tiktoken

    import chatfold.compat.chatcram as our_chatcram
    import chatfold.compat.rollmem as our_rollmem

    rounds = 3 if quick else 7
    adds = 1_000 if quick else 5_000  # two adds each: 10 000 adds in all
    compare(f"rolling memory, {2 * adds} adds", rolling_adds(our_rollmem, adds), rolling_adds(rollmem, adds), rounds)

    def summary(transcript):
        return f"{len(transcript)} characters of earlier conversation."

    ours_tok, theirs_tok = our_chatcram.tiktoken_tokenizer("gpt-4o"), their_tiktoken("gpt-4o")
    ours_tok.count("warm up")
    theirs_tok.count("warm up")
    for n in ([10_000] if quick else [10_000, 100_000]):
        messages = history(n)
        ours = our_chatcram.Compactor(8000, summary, tokenizer=ours_tok)
        theirs = chatcram.Compactor(8000, summary, tokenizer=theirs_tok)
        compare(f"compaction of {n} messages, o200k", lambda: ours.compact(messages), lambda: theirs.compact(messages), 3 if n >= 100_000 else rounds)

    crossing_cost(rounds)
    tiered_against_sawtooth(1_000 if quick else 5_000, 3)


if __name__ == "__main__":
    main()
