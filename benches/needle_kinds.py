"""Needles of many kinds through the command, stateless, in both formats.

    cargo build --release --features cli
    python3 benches/needle_kinds.py [--exe target/release/chatfold] [--seeds 7 1 2] [--fold-to TOKENS]

A 200-turn conversation (its own seeded generator, not benches/needle.rs's)
places 54 identifiers of 24 kinds in its first 20 turns: in user prose, in
tool calls' arguments and in JSON tool results (Windows paths and all, so
their escapes are real). Before every user turn the whole context goes
through `chatfold compact --budget 2000` with a lossy summarizer command
(the first sentence of each folded turn, 60 words at most, the previous
summary dropped), and the output is the next turn's context. It prints,
per seed and format, how many identifiers the final context holds
verbatim and the most tokens a context took (o200k, `chatfold count`).
"""

import argparse
import json
import pathlib
import random
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOSSY = r"""awk '/^Previous summary:/ { skip = 1; next } /^Conversation:/ { skip = 0; next } !skip' | sed -E 's/^[a-z_]+: //; s/([.?!]).*/\1/' | tr '\n' ' ' | awk '{ n = NF < 60 ? NF : 60; for (i = 1; i <= n; i++) printf "%s ", $i; if (n == 0) printf "Earlier turns." }'"""
WORDS = ["orders", "refunds", "ledger", "ingest", "billing", "auth", "search", "reports", "edge", "queue"]


def conversation(seed):
    """The messages (OpenAI's shape) and the identifiers they hold."""
    rng = random.Random(seed)
    hx = lambda n: "".join(rng.choice("0123456789abcdef") for _ in range(n))
    al = lambda n: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))
    w = lambda: rng.choice(WORDS)
    kinds = [
        lambda: f"{w()}-api-{hx(9)}-{al(5)}",
        lambda: hx(40),
        lambda: f"s3://{w()}-exports/{rng.randint(2020, 2026)}/{w()}.csv",
        lambda: f"ghcr.io/acme/{w()}:{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 20)}",
        lambda: f"{w()}.oncall@acme-corp.com",
        lambda: f"2001:db8:{hx(4)}::{hx(3)}",
        lambda: f"{rng.choice(['PAY', 'INFRA', 'SEC'])}-{rng.randint(100, 9999)}",
        lambda: f"cus_{al(14)}",
        lambda: f"https://grafana.acme-corp.com/d/{al(8)}/{w()}?orgId=1&from=now-6h",
        lambda: f"C:\\deploy\\{w()}\\config-{rng.randint(1, 99)}.yaml",
        lambda: f"{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 30)}-rc.{rng.randint(1, 5)}",
        lambda: f"CVE-{rng.randint(2019, 2026)}-{rng.randint(1000, 99999)}",
        lambda: hx(64),
        lambda: f"{w()}-db.prod.internal:{rng.randint(1000, 9999)}",
        lambda: f"{w()}/src/{w()}/handler_{rng.randint(1, 99)}.py",
        lambda: f"{hx(8)}-{hx(4)}-4{hx(3)}-9{hx(3)}-{hx(12)}",
        lambda: f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        lambda: f"INV-{rng.randint(2020, 2026)}-{rng.randint(10000, 99999)}",
        lambda: f"deploy/{w()}-{al(4)}",
        lambda: f"{rng.choice(['postgres', 'redis', 'python', 'node'])}:{rng.randint(3, 20)}.{rng.randint(0, 9)}-alpine",
        lambda: f"src/{w()}/{w().capitalize()}Handler",
        lambda: f"sha256:{hx(64)}",
        lambda: f"10.{rng.randint(0, 255)}.0.0/{rng.choice([8, 16, 24])}",
        lambda: f"github.com/acme/{w()}-{al(3)}",
    ]
    needles = []

    def needle():
        needles.append(kinds[len(needles) % len(kinds)]())
        return needles[-1]

    messages = [{"role": "system", "content": "You help the platform team debug production."}]
    call = 0
    for turn in range(200):
        if turn < 20:
            a, b = needle(), needle()
            messages.append({"role": "user", "content": f"Something odd with {w()} again. We saw {a} in the alert, and {b} came up in the postmortem. Can you check?"})
            if turn % 3 == 0:
                call += 1
                cid = f"toolu_{call:04d}"
                arguments = json.dumps({"target": needle()})
                messages.append({"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": cid, "type": "function", "function": {"name": "lookup", "arguments": arguments}}]})
                result = json.dumps({"resource": needle(), "healthy": False, "restarts": rng.randint(1, 40)})
                messages.append({"role": "tool", "tool_call_id": cid, "content": result})
            messages.append({"role": "assistant", "content": f"Checked. The {w()} service is degraded; I'd restart it and watch the {w()} graphs."})
        else:
            messages.append({"role": "user", "content": f"Turn {turn}. Anything new on {w()} or {w()}? Please keep watching the error budget."})
            messages.append({"role": "assistant", "content": f"Nothing new. The {w()} error budget is intact and {w()} traffic looks normal for this hour of the day."})
    return messages, needles


def anthropic(messages):
    """OpenAI-shaped turns as Anthropic's: tool_use and tool_result blocks."""
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for c in m["tool_calls"]:
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": json.loads(c["function"]["arguments"])})
            out.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def strings(value, out):
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            strings(v, out)
    elif isinstance(value, list):
        for v in value:
            strings(v, out)
    return out


def compact_loop(exe, messages, fmt, fold_to=None):
    """Feeds `messages` (OpenAI's shape) turn by turn through `chatfold
    compact --budget 2000` (and `--fold-to`, if given) with the lossy
    summarizer, in `fmt`: the final body and the most tokens a context
    took."""
    extra = ["--fold-to", str(fold_to)] if fold_to else []
    if fmt == "anthropic":
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": messages[0]["content"], "messages": []}
    else:
        body = {"model": "gpt-4o", "messages": [messages[0]]}
    ends = [i for i in range(2, len(messages) + 1) if i == len(messages) or messages[i]["role"] == "user"]
    done, most = 1, 0
    for end in ends:
        new = messages[done:end]
        done = end
        body["messages"].extend(anthropic(new) if fmt == "anthropic" else new)
        out = subprocess.run([exe, "compact", "--budget", "2000", "--summarize-cmd", LOSSY, *extra], input=json.dumps(body), capture_output=True, text=True, check=True)
        body = json.loads(out.stdout)
        count = subprocess.run([exe, "count", "--tokenizer", "o200k_base", "-"], input=out.stdout, capture_output=True, text=True, check=True)
        most = max(most, int(count.stdout.split()[0]))
    return body, most


def run(exe, seed, fmt, fold_to=None):
    messages, needles = conversation(seed)
    body, most = compact_loop(exe, messages, fmt, fold_to)
    text = "\n".join(strings(body, []))
    kept = [n for n in needles if n in text]
    missing = [n for n in needles if n not in text]
    print(f"seed {seed}, {fmt:<9}: {len(kept)} of {len(needles)} kept, at most {most} tokens; missing {missing}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--exe", default=str(ROOT / "target/release/chatfold"))
    parser.add_argument("--seeds", type=int, nargs="*", default=[7, 1, 2])
    parser.add_argument("--fold-to", help="chatfold's --fold-to (default: its own, half the budget)")
    args = parser.parse_args()
    for seed in args.seeds:
        for fmt in ["openai", "anthropic"]:
            run(args.exe, seed, fmt, args.fold_to)


if __name__ == "__main__":
    main()
