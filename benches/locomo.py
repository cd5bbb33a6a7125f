"""How many answers to LoCoMo's questions survive one compaction: chatfold
beside three baselines, tune and held-out parts reported apart.

    cargo build --release --features cli
    target/py-venv/bin/python benches/locomo.py [--data /work/shared/data/locomo-dev]
        [--exe target/release/chatfold] [--files 26 30 41 42 43]
        [--budgets 2000 4000 8000] [--part tune|held-out|both] [--json OUT]

LoCoMo (snap-research/locomo; Maharana et al., "Evaluating Very Long-Term
Conversational Memory of LLM Agents", ACL 2024) is a set of long two-person
conversations, each of about 20-30 sessions, with questions about them. The
data stays out of this repository: `--data` names the folder of its JSON
files (one conversation a file, named by its sample number: 26.json ...).

Each conversation becomes an OpenAI Chat Completions history: a system
message ("You are a helpful assistant."), then every turn in order, speaker
A as `user` and speaker B as `assistant` (consecutive turns of one speaker
stay separate messages). The first turn of each session is prefixed with
the session's date as given, "[1:56 pm on 8 May, 2023] "; a turn that
shares a photo gets " [shares a photo of ...]" (its `blip_caption`)
appended. The dataset's observations, event lists and session summaries
are not used.

A question counts if it is of category 1-4 (single-hop, multi-hop,
temporal, open-domain; 5, adversarial, has no answer) and its answer
(str(), lowercased, stripped) occurs verbatim, case-insensitively, in the
converted conversation's text. The score is the share of those whose
answer still occurs in the compacted history's text (every message's
content joined). This measures only whether the words are still there to
be read, not whether a model would answer; a short answer ("yes", "2022")
may also survive by chance.

The sides, each compacting the whole conversation once to a budget B of
2000, 4000 and 8000 tokens (o200k_base):

  chatfold           `chatfold compact --budget B`, its defaults and its
                     built-in extractive summarizer (no model)
  chatfold fold-to=B the same with `--fold-to B`: the fold may fill the
                     budget instead of half of it
  middle-out         the system message, then as many messages from the
                     start and from the end as fit, the middle dropped
                     (OpenRouter's "middle-out"): the start takes up to half
                     of what is left, the end the rest, then the start again
  newest             the system message and the newest messages that fit
  sentence ranker    every sentence scored by its rare words (inverse
                     frequency in the conversation), capitalised names and
                     numbers; the best that fit, in conversation order, in
                     one system message after the system prompt (no turns
                     kept verbatim). A ~30-line baseline, not a product.

The baselines count tokens as `chatfold count` does (OpenAI chat
accounting: a message's content in o200k_base, 4 tokens a message, 3 for
the reply's priming); the script checks that every side's output is within
B by that count. tiktoken reads o200k_base from tiktoken-rs's bundled copy
(as python/tests/conftest.py does), so nothing is downloaded.

It prints, per part (`tune` = 26, 30, 41, on which the summarizer may be
tuned; `held-out` = 42, 43, otherwise read only as these totals), a table
of sides by budgets, each cell "share (kept/qualifying)", then the same per
conversation. `--json` writes every count and the ids of the questions
kept.
"""

import argparse
import glob
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = "/work/shared/data/locomo-dev"
PARTS = {"tune": ["26", "30", "41"], "held-out": ["42", "43"]}
BUDGETS = [2000, 4000, 8000]
SYSTEM = "You are a helpful assistant."
SIDES = ["chatfold", "chatfold fold-to=B", "middle-out", "newest", "sentence ranker"]


def tokenizer():
    """o200k_base from tiktoken-rs's bundled vocabulary (python/tests/conftest.py)."""
    import tiktoken

    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return tiktoken.get_encoding("o200k_base")
    home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    found = sorted(glob.glob(str(home / "registry/src/*/tiktoken-rs-*/assets/o200k_base.tiktoken")))
    if not found:
        sys.exit("no o200k_base.tiktoken in tiktoken-rs's assets under $CARGO_HOME; set TIKTOKEN_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="chatfold-tiktoken-") as folder:
        url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
        shutil.copy(found[-1], pathlib.Path(folder) / hashlib.sha1(url.encode()).hexdigest())
        os.environ["TIKTOKEN_CACHE_DIR"] = folder
        try:
            return tiktoken.get_encoding("o200k_base")  # read now, kept in memory
        finally:
            del os.environ["TIKTOKEN_CACHE_DIR"]


ENC = None


def tokens(text):
    return len(ENC.encode(text, disallowed_special=()))


def cost(message):
    return tokens(message["content"]) + 4


def total(messages):
    return sum(cost(m) for m in messages) + 3


def convert(sample):
    """The conversation as chat messages, and its questions."""
    a, b = sample["speaker_a"], sample["speaker_b"]
    roles = {a: "user", b: "assistant"}
    numbers = sorted(int(k.split("_")[1]) for k in sample if re.fullmatch(r"session_\d+", k) and isinstance(sample[k], list))
    messages = [{"role": "system", "content": SYSTEM}]
    for n in numbers:
        for i, turn in enumerate(sample[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [shares {turn['blip_caption']}]"
            if i == 0:
                text = f"[{sample[f'session_{n}_date_time']}] {text}"
            messages.append({"role": roles[turn["speaker"]], "content": text})
    return messages, sample["qa"]


def text_of(messages):
    return "\n".join(m["content"] for m in messages).lower()


def chatfold(exe, messages, budget, fold_to=False):
    cmd = [exe, "compact", "--budget", str(budget), "--tokenizer", "o200k_base"]
    if fold_to:
        cmd += ["--fold-to", str(budget)]
    out = subprocess.run(cmd, input=json.dumps(messages), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def middle_out(messages, budget):
    system, rest = messages[0], messages[1:]
    room = budget - 3 - cost(system)
    head, tail, used = 0, 0, 0
    for end, limit in [("head", room // 2), ("tail", room), ("head", room)]:
        while head + tail < len(rest):
            c = cost(rest[head] if end == "head" else rest[len(rest) - 1 - tail])
            if used + c > limit:
                break
            used += c
            head, tail = (head + 1, tail) if end == "head" else (head, tail + 1)
    return [system] + rest[:head] + rest[len(rest) - tail:]


def newest(messages, budget):
    system, rest = messages[0], messages[1:]
    room, kept = budget - 3 - cost(system), 0
    while kept < len(rest) and cost(rest[len(rest) - 1 - kept]) <= room:
        room -= cost(rest[len(rest) - 1 - kept])
        kept += 1
    return [system] + rest[len(rest) - kept:]


def ranker(messages, budget):
    """Sentences by rare words, names and numbers; the best that fit, in order."""
    words = lambda s: re.findall(r"[A-Za-z0-9']+", s)
    sents = [(i, s) for i, m in enumerate(messages[1:]) for s in re.split(r"(?<=[.!?])\s+", m["content"]) if s.strip()]
    freq = Counter(w.lower() for _, s in sents for w in words(s))

    def score(s):
        ws = set(words(s))
        rare = sum(1 / freq[w.lower()] for w in {w.lower() for w in ws})
        names = sum(1 for w in ws if w[0].isupper() and not s.startswith(w))
        numbers = sum(1 for w in ws if any(c.isdigit() for c in w))
        return rare + 0.5 * names + 0.5 * numbers

    ranked = sorted(range(len(sents)), key=lambda k: (-score(sents[k][1]), k))
    room = budget - 3 - cost(messages[0]) - 4
    chosen = []
    for k in ranked:
        line = f"{messages[1 + sents[k][0]]['role']}: {sents[k][1]}"
        if tokens(line) + 1 <= room:
            room -= tokens(line) + 1
            chosen.append(k)

    def render(ks):
        lines = [f"{messages[1 + sents[k][0]]['role']}: {sents[k][1]}" for k in sorted(ks)]
        return [messages[0], {"role": "system", "content": "Summary of the earlier conversation:\n" + "\n".join(lines)}]

    while total(render(chosen)) > budget:  # joining may merge tokens: drop the weakest
        chosen.pop()
    return render(chosen)


def evaluate(exe, path, budgets):
    messages, qa = convert(json.loads(path.read_text()))
    whole = text_of(messages)
    questions = [(k, str(q["answer"]).lower().strip()) for k, q in enumerate(qa) if q["category"] in (1, 2, 3, 4) and "answer" in q]
    questions = [(k, a) for k, a in questions if a and a in whole]
    result = {"messages": len(messages), "tokens": total(messages), "questions": len(questions), "sides": {}}
    for side in SIDES:
        result["sides"][side] = {}
        for budget in budgets:
            if side.startswith("chatfold"):
                out = chatfold(exe, messages, budget, fold_to=side != "chatfold")
            else:
                out = {"middle-out": middle_out, "newest": newest, "sentence ranker": ranker}[side](messages, budget)
            used = total(out)
            if used > budget:
                sys.exit(f"{path.name}: {side} at {budget} takes {used} tokens")
            text = text_of(out)
            kept = [k for k, a in questions if a in text]
            result["sides"][side][str(budget)] = {"kept": len(kept), "of": len(questions), "tokens": used, "kept_ids": kept, "output": out}
    return result


def cell(kept, of):
    return f"{100 * kept / of:.0f}% ({kept}/{of})" if of else "-"


def table(title, results, budgets):
    print(f"\n{title}")
    width = 20
    print(f"{'':{width}}" + "".join(f"{f'B={b}':>18}" for b in budgets))
    for side in SIDES:
        cells = []
        for b in budgets:
            kept = sum(r["sides"][side][str(b)]["kept"] for r in results)
            of = sum(r["sides"][side][str(b)]["of"] for r in results)
            cells.append(cell(kept, of))
        print(f"{side:{width}}" + "".join(f"{c:>18}" for c in cells))


def main():
    global ENC
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DATA, help="folder of LoCoMo JSON files (26.json ...)")
    default_exe = ROOT / "target/release/chatfold"
    if not default_exe.exists():
        default_exe = ROOT / "target/debug/chatfold"
    parser.add_argument("--exe", default=str(default_exe))
    parser.add_argument("--files", nargs="*", default=PARTS["tune"] + PARTS["held-out"])
    parser.add_argument("--budgets", type=int, nargs="*", default=BUDGETS)
    parser.add_argument("--part", choices=["tune", "held-out", "both"], default="both")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    ENC = tokenizer()

    parts = ["tune", "held-out"] if args.part == "both" else [args.part]
    files = [f.removesuffix(".json") for f in args.files]
    outside = [f for f in files if not any(f in PARTS[p] for p in PARTS)]
    results = {}
    for f in files:
        if f in outside or any(f in PARTS[p] for p in parts):
            results[f] = evaluate(args.exe, pathlib.Path(args.data) / f"{f}.json", args.budgets)
            r = results[f]
            print(f"{f}.json: {r['messages']} messages, {r['tokens']} tokens, {r['questions']} questions qualify", file=sys.stderr, flush=True)

    print("LoCoMo answers still in the context after one compaction (Maharana et al., ACL 2024)")
    groups = [(p, [f for f in files if f in PARTS[p]]) for p in parts] + ([("other", outside)] if outside else [])
    for name, group in groups:
        if group:
            table(f"{name} ({', '.join(group)}): total", [results[f] for f in group], args.budgets)
    for name, group in groups:
        for f in group:
            table(f"{name}: {f}.json", [results[f]], args.budgets)
    if args.json:
        summary = {
            "data": str(args.data), "exe": args.exe, "budgets": args.budgets, "parts": {p: g for p, g in groups},
            "conversations": {f: {**r, "sides": {s: {b: {k: v for k, v in c.items() if k != "output"} for b, c in bs.items()} for s, bs in r["sides"].items()}} for f, r in results.items()},
        }
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
