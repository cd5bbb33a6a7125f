"""The ledger's recall and precision on identifiers of many domains, tuned
and held-out parts reported apart.

    cargo build --release --features cli
    python3 benches/ledger_eval.py [--exe target/release/chatfold] [--seeds 7 1 2] [--part tuned|held-out|both]
    cargo build --release --example ledger_memory
    python3 benches/ledger_eval.py --memory       # RollingMemory and TieredMemory
    python3 benches/ledger_eval.py --busy         # later turns with identifiers of their own
    python3 benches/ledger_eval.py --spaced       # identifiers with inner spaces only

A generator of identifier shapes from support, cloud, code, data, science,
law, chat platforms and non-Latin text. Its kinds are split in two before
the recognizer is changed: the `tuned` part may be looked at identifier by
identifier while the recognizer is worked on; the `held-out` part is only
ever read as the totals this script prints. Each kind is planted in its
own contexts (user prose, an assistant reply, a tool call's arguments, a
JSON tool result, a markdown table, backticks, a code block, CJK text,
typographic quotes, followed by punctuation), beside look-alikes that are
not identifiers (`COVID-19`, `x86_64`, a browser's user agent, round
numbers, hyphenated words).

A 200-turn conversation plants them in its first 40 turns; before every
user turn the whole context goes through `chatfold compact --budget 2000`
with a lossy summarizer command (benches/needle_kinds.py's: the first
sentence of each folded turn), and the output is the next turn's context.
With `--memory`, the same
conversation goes into RollingMemory and TieredMemory instead
(benches/ledger_memory.rs), and the memory's view is read at the end.
It prints, per part: recall (planted identifiers the final context holds
verbatim; and of those the user stated, apart),
and of the final ledger's entries how many are wrong (a
tool-call id, a fragment of a planted identifier, a look-alike, a piece of
a user agent), and the most tokens a context took.
"""

import argparse
import json
import pathlib
import random
import re
import string
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from needle_kinds import compact_loop, strings  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADING = "Exact identifiers (kept verbatim):"
WORDS = ["orders", "refunds", "ledger", "ingest", "billing", "search", "reports", "edge", "queue", "payments"]


def iban(rng, country, length):
    """A valid IBAN (mod 97) of `length` characters, in groups of four."""
    bban = "".join(rng.choice(string.digits) for _ in range(length - 4))
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(digits) % 97
    raw = f"{country}{check:02d}{bban}"
    return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4))


def isbn13(rng):
    body = "978" + "".join(rng.choice(string.digits) for _ in range(9))
    total = sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(body))
    check = (10 - total % 10) % 10
    return f"{body[:3]}-{body[3]}-{body[4:7]}-{body[7:12]}-{check}"


def spaced_kinds(rng):
    """(name, generator) for identifiers with inner spaces (`--spaced`),
    split as `kinds` is. The held-out ones were written with this list,
    after the recognizer's rules for runs of code groups, and are read
    only as totals (the rule table's row for spaced code groups lists a
    Canadian postcode among its examples, from before)."""
    d = lambda lo, hi: rng.randint(lo, hi)
    caps = lambda n: "".join(rng.choice(string.ascii_uppercase) for _ in range(n))
    return [
        ("nl-postcode", lambda: f"{d(1000, 9999)} {caps(2)}"),
        ("ca-postcode", lambda: f"{caps(1)}{d(0, 9)}{caps(1)} {d(0, 9)}{caps(1)}{d(0, 9)}"),
        ("kr-plate", lambda: f"{d(10, 999)}{rng.choice('가나다라마거너더러머')} {d(1000, 9999)}"),
        ("eircode", lambda: f"{caps(1)}{d(10, 99)} {caps(1)}{d(100, 999)}"),
        ("container", lambda: f"{caps(3)}U {d(100000, 999999)} {d(0, 9)}"),
        ("mt-postcode", lambda: f"{caps(3)} {d(1000, 9999)}"),
        ("uk-postcode", lambda: f"{caps(2)}{d(1, 9)}{caps(1)} {d(1, 9)}{caps(2)}"),
        ("br-plate", lambda: f"{caps(3)} {d(1, 9)}{caps(1)}{d(10, 99)}"),
        ("siret", lambda: f"{d(100, 999)} {d(100, 999)} {d(100, 999)} {d(10000, 99999)}"),
        ("uk-ni", lambda: f"{caps(2)} {d(10, 99)} {d(10, 99)} {d(10, 99)} {caps(1)}"),
    ]


def kinds(rng):
    """(name, generator) for every kind. The split is by position: even
    positions are tuned, odd ones held out, fixed before any run."""
    hx = lambda n: "".join(rng.choice("0123456789abcdef") for _ in range(n))
    al = lambda n: "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))
    up = lambda n: "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(n))
    b64 = lambda n: "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(n))
    d = lambda lo, hi: rng.randint(lo, hi)
    w = lambda: rng.choice(WORDS)
    camel = lambda: rng.choice(["validate", "reconcile", "fetch", "compute", "emit"]) + w().capitalize() + rng.choice(["Batch", "Window", "Ledger", "Cursor"])
    return [
        ("order-hash", lambda: f"#{d(100000, 999999)}"),
        ("phone-e164", lambda: f"+44 20 {d(1000, 9999)} {d(1000, 9999)}"),
        ("iban", lambda: iban(rng, rng.choice(["DE", "GB", "FR", "NL"]), rng.choice([22, 22, 27, 18]))),
        ("account-12", lambda: f"{d(10, 99)}{d(1000000000, 9999999999)}"),
        ("function-call", lambda: f"{camel()}()"),
        ("dotted-name", lambda: f"com.acme.{w()}.{w().capitalize()}Service"),
        ("env-var", lambda: f"{w().upper()}_API_{rng.choice(['TIMEOUT', 'TOKEN_TTL', 'MAX_RETRIES'])}"),
        ("money", lambda: f"${d(1, 99)},{d(100, 999)}.{d(10, 99)}"),
        ("iso-timestamp", lambda: f"2026-0{d(1, 9)}-{d(10, 28)}T{d(10, 23)}:{d(10, 59)}:{d(10, 59)}Z"),
        ("iso-date", lambda: f"2025-{d(10, 12)}-{d(10, 28)}"),
        ("isbn", lambda: isbn13(rng)),
        ("cas", lambda: f"{d(100, 9999)}-{d(10, 99)}-{d(0, 9)}"),
        ("arxiv", lambda: f"arXiv:{d(2001, 2412)}.{d(10000, 99999)}"),
        ("court-case", lambda: f"{d(1, 9)}:{d(19, 25)}-cv-{d(10000, 99999)}"),
        ("mac", lambda: ":".join(f"{d(0, 255):02X}" for _ in range(6))),
        ("base64-cursor", lambda: b64(d(28, 44)) + "=="),
        ("file-line", lambda: f"{w()}_store.rs:{d(10, 999)}"),
        ("npm-scoped", lambda: f"@acme/{w()}-kit@{d(1, 20)}.{d(0, 20)}.{d(0, 20)}"),
        ("git-branch", lambda: f"feature/OPS-{d(100, 999)}-{w()}-fix"),
        ("azure-id", lambda: f"/subscriptions/{hx(8)}-{hx(4)}-{hx(4)}-{hx(4)}-{hx(12)}/resourceGroups/rg-{w()}/providers/Microsoft.Compute/virtualMachines/vm-{w()}-0{d(1, 9)}"),
        ("slack-channel", lambda: f"#inc-{d(1000, 9999)}-{w()}"),
        ("jira", lambda: f"{rng.choice(['PAY', 'OPS', 'DATA'])}-{d(100, 9999)}"),
        ("ec2-instance", lambda: f"i-0{hx(16)}"),
        ("gcp-project", lambda: f"acme-{w()}-{d(100000, 999999)}"),
        ("k8s-pod", lambda: f"{w()}-api-{hx(9)}-{al(5)}"),
        ("git-sha", lambda: hx(7)),
        ("pip-pin", lambda: f"{rng.choice(['requests', 'urllib3', 'pydantic'])}=={d(1, 3)}.{d(0, 31)}.{d(0, 9)}"),
        ("docker-image", lambda: f"{w()}team/{w()}-svc:{d(1, 9)}.{d(0, 9)}"),
        ("sql-table", lambda: f"analytics.fct_{w()}_daily"),
        ("doi", lambda: f"10.{d(1000, 9999)}/s{d(10000, 99999)}-0{d(10, 99)}-{d(1000, 9999)}-{d(0, 9)}"),
        ("pmid", lambda: f"PMID:{d(10000000, 39999999)}"),
        ("tracking-ups", lambda: f"1Z{up(6)}{d(10, 99)}{d(10000000, 99999999)}"),
        ("vin", lambda: f"1HG{up(5)}{d(10, 99)}A{d(100000, 999999)}"),
        ("wallet", lambda: "0x" + "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(40))),
        ("tz-name", lambda: rng.choice(["America/Los_Angeles", "Europe/Isle_of_Man", "America/Port_of_Spain", "America/Argentina/Buenos_Aires"])),
        ("rust-path", lambda: f"{w()}::store::{w().capitalize()}Index"),
        ("redis-key", lambda: f"session:{w()}:{d(10000, 99999)}"),
        ("kafka-topic", lambda: f"{w()}.v{d(2, 9)}.created"),
        ("sentry-issue", lambda: f"{w().upper()}-API-{d(1, 9)}{up(2)}"),
        ("license-key", lambda: "-".join(up(5) for _ in range(4))),
        ("serial", lambda: f"SN-{hx(4).upper()}-{hx(4).upper()}-{hx(4).upper()}"),
        ("request-id", lambda: f"req_{b64(12).replace('+', 'x').replace('/', 'y')}"),
        ("flight", lambda: f"{rng.choice(['BA', 'LH', 'UA', 'AF'])}{d(100, 9999)}"),
        ("semver-range", lambda: f"^{d(1, 9)}.{d(0, 30)}.{d(0, 30)}"),
        ("invoice-de", lambda: f"RE-{d(2020, 2026)}/{d(10000, 99999)}"),
        ("booking-ref", lambda: up(6)),
        ("ipv4-port", lambda: f"10.{d(0, 255)}.{d(0, 255)}.{d(1, 254)}:{d(1024, 65535)}"),
        ("email", lambda: f"{w()}.{rng.choice(['ops', 'team', 'desk'])}@{rng.choice(['acme.io', 'example.org', 'corp.acme.de'])}"),
    ]


# The contexts an identifier is planted in: (speaker, how it is written).
# `{id}` is the identifier; `{w}` a word.
PROSE = [
    "Customer reports a problem with {id}, can you look into it?",
    "We saw {id} in the alert earlier.",
    "Please double-check `{id}` before we continue.",
    "The reference is „{id}“ according to the form.",
    "Der Vorgang «{id}» ist noch offen.",
    "请检查{id}的状态。",
    "確認番号は「{id}」です。",
    "Ticket: {id}; nothing else yet.",
    "| field | value |\n|---|---|\n| ref | {id} |\n| status | open |",
    "Logs say:\n```\nERROR while handling {id} (retrying)\n```",
    "It failed again ({id}).",
    "See {id}!",
]
LOOKALIKES = [
    "Since COVID-19 we run GPT-4 on x86_64 with UTF-8 and SHA-256, 24/7, in Q3.",
    "The UA was Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.129 Safari/537.36 this time.",
    "Roughly 1,000,000 rows, 50% done after 100ms; we follow-up e.g. on the iPhone and/or JavaScript side in 2024.",
    "The UA was Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15 again.",
]


def conversation(seed, part, busy=False, spaced=False):
    """The messages (OpenAI's shape), the planted identifiers with their
    kinds, the look-alike texts and the tool-call ids. With `busy`, the
    turns after the planted ones hold identifiers of their own (a build,
    a file, a version each turn; a status call with a request id every
    fifth), which compete with the planted ones for the ledger's room."""
    rng = random.Random(seed * 1009 + (0 if part == "tuned" else 1))
    all_kinds = spaced_kinds(rng) if spaced else kinds(rng)
    chosen = [k for i, k in enumerate(all_kinds) if (i % 2 == 0) == (part == "tuned")]
    planted = []
    # The planted identifiers the user stated (the others are a call's).
    stated = set()
    call_ids = []
    messages = [{"role": "system", "content": "You help the support and platform teams."}]
    call = 0
    for turn in range(200):
        if turn < 40:
            name, make = chosen[turn % len(chosen)]
            ident = make()
            planted.append((name, ident))
            stated.add(ident)
            context = rng.choice(PROSE)
            messages.append({"role": "user", "content": context.replace("{id}", ident) + " " + rng.choice(LOOKALIKES)})
            if turn % 2 == 0:
                call += 1
                cid = rng.choice([f"call_{''.join(rng.choice(string.ascii_letters + string.digits) for _ in range(24))}", f"toolu_01{''.join(rng.choice(string.ascii_letters + string.digits) for _ in range(22))}"])
                call_ids.append(cid)
                name2, make2 = chosen[(turn + 7) % len(chosen)]
                other = make2()
                planted.append((name2, other))
                key = rng.choice(["booking_ref", "reference", "id", "target", "account", "query"])
                arguments = json.dumps({key: other, "verbose": False})
                messages.append({"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": cid, "type": "function", "function": {"name": "lookup", "arguments": arguments}}]})
                result = {"status": "found", "call": cid, "note": f"matched on {other}.", "agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.85 Safari/537.36"}
                messages.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
            messages.append({"role": "assistant", "content": f"Checked {rng.choice(WORDS)}; nothing else stands out. I'd watch it for an hour."})
        elif not busy:
            messages.append({"role": "user", "content": f"Turn {turn}. Anything new on {rng.choice(WORDS)}? Please keep watching the error budget."})
            messages.append({"role": "assistant", "content": f"Nothing new. The {rng.choice(WORDS)} error budget is intact and traffic looks normal for this hour of the day."})
        else:
            word = rng.choice(WORDS)
            build = "".join(rng.choice("0123456789abcdef") for _ in range(10))
            messages.append({"role": "user", "content": f"Turn {turn}. Anything new on {word}? Please keep watching the error budget."})
            messages.append({"role": "assistant", "content": f"Deployed build {build} from `services/{word}/handler_{turn}.py` at v{turn % 7}.{turn % 11}.{turn}; the error budget is intact."})
            if turn % 5 == 0:
                cid = f"call_{''.join(rng.choice(string.ascii_letters + string.digits) for _ in range(24))}"
                call_ids.append(cid)
                request = "req_" + "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(12))
                arguments = json.dumps({"service": word, "request_id": request})
                messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {"name": "status", "arguments": arguments}}]})
                messages.append({"role": "tool", "tool_call_id": cid, "content": json.dumps({"status": "ok", "request_id": request})})
                messages.append({"role": "assistant", "content": "All green."})
    return messages, planted, call_ids, stated


def ledger_entries(body):
    """The entries of every ledger section in the final context."""
    out = []
    for text in strings(body, []):
        at = text.rfind(HEADING)
        if at >= 0:
            out.extend(line[2:] for line in text[at + len(HEADING):].splitlines() if line.startswith("- "))
    return out


def value_of(entry):
    m = re.match(r"^[A-Za-z0-9_.\-]+: (.*)$", entry)
    return m.group(1) if m else entry


def judge(entry, planted, call_ids):
    """Why `entry` is wrong, or None."""
    v = value_of(entry)
    ids = [p for _, p in planted]
    if any(v == c or c in v for c in call_ids):
        return "structural"
    if v in ids:
        return None
    if any(v in p for p in ids):
        return "fragment"
    if any(v in text for text in LOOKALIKES):
        return "look-alike"
    return None


def run(exe, seed, fmt, part, busy=False, fold_to=None, spaced=False):
    messages, planted, call_ids, stated = conversation(seed, part, busy, spaced)
    if fmt in ("rolling", "tiered"):
        # The memories, through benches/ledger_memory.rs (OpenAI's shape).
        driver = pathlib.Path(exe).parent / "examples" / "ledger_memory"
        out = subprocess.run([str(driver), fmt], input=json.dumps(messages), capture_output=True, text=True, check=True)
        body = {"messages": json.loads(out.stdout)}
        count = subprocess.run([exe, "count", "--tokenizer", "o200k_base", "-"], input=json.dumps(body), capture_output=True, text=True, check=True)
        most = int(count.stdout.split()[0])
    else:
        body, most = compact_loop(exe, messages, fmt, fold_to)
    text = "\n".join(strings(body, []))
    kept = [(k, p) for k, p in planted if p in text]
    entries = ledger_entries(body)
    wrong = {}
    for e in entries:
        why = judge(e, planted, call_ids)
        if why:
            wrong.setdefault(why, []).append(e)
    said = {p for _, p in kept if p in stated}
    return planted, kept, entries, wrong, most, len(stated), len(said)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--exe", default=str(ROOT / "target/release/chatfold"))
    parser.add_argument("--seeds", type=int, nargs="*", default=[7, 1, 2])
    parser.add_argument("--part", choices=["tuned", "held-out", "both"], default="both")
    parser.add_argument("--show", action="store_true", help="list the tuned part's misses and wrong entries")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="through RollingMemory and TieredMemory (cargo build --release --example ledger_memory) instead of the command",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="the turns after the planted ones hold identifiers of their own, competing for the ledger's room",
    )
    parser.add_argument("--spaced", action="store_true", help="identifiers with inner spaces (postcodes, plates, containers ...) only")
    parser.add_argument("--fold-to", help="chatfold's --fold-to (default: its own, half the budget)")
    args = parser.parse_args()
    parts = ["tuned", "held-out"] if args.part == "both" else [args.part]
    for part in parts:
        totals = [0, 0, 0, 0, 0, 0, 0]
        for seed in args.seeds:
            for fmt in ["rolling", "tiered"] if args.memory else ["openai", "anthropic"]:
                planted, kept, entries, wrong, most, stated, said = run(args.exe, seed, fmt, part, args.busy, args.fold_to, args.spaced)
                n_wrong = sum(len(v) for v in wrong.values())
                totals[0] += len(planted)
                totals[1] += len(kept)
                totals[2] += len(entries)
                totals[3] += n_wrong
                totals[4] = max(totals[4], most)
                totals[5] += stated
                totals[6] += said
                if args.show and part == "tuned":
                    missing = sorted({f"{k}: {p}" for k, p in planted if (k, p) not in kept})
                    print(f"  seed {seed} {fmt}: missing {missing}")
                    print(f"  seed {seed} {fmt}: wrong {wrong}")
        planted_n, kept_n, entries_n, wrong_n, most, stated_n, said_n = totals
        print(
            f"{part:<8}: recall {kept_n} of {planted_n} ({100 * kept_n / planted_n:.0f}%), "
            f"the user's {said_n} of {stated_n} ({100 * said_n / max(stated_n, 1):.0f}%), "
            f"wrong entries {wrong_n} of {entries_n} ({100 * wrong_n / max(entries_n, 1):.0f}%), "
            f"at most {most} tokens"
        )


if __name__ == "__main__":
    main()
