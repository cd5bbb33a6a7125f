"""What compaction costs at the provider's prices, every client in one run.

    cargo build --features cli          # or --release; the newest binary is used
    python3 benches/peers/cost.py [--budget 4000] [--turns 200] [--fold-to 50%,100%] [--quick]

Needs Python's `tiktoken` (its o200k vocabulary is taken from tiktoken-rs's
bundled copy, offline) and, for the memories' rows, the chatfold Python
package (`pip install ./python`); without it those rows are skipped.

The session: a seeded, 200-turn conversation of an SRE agent. Most turns make
tool calls (one or two, in parallel) whose results are a few hundred tokens;
the client sends a request each time the model must answer (after a user
turn, after tool results). Every request is measured as a provider bills it:
the leading messages identical to the previous request's are the cached
part, the rest is written to the cache.

- Anthropic's prices: cache read 0.1x, cache write 1.25x of the base price.
- OpenAI's prices: cached input 0.1x, the rest 1x; a prefix is cached only
  from 1 024 tokens.

Costs are given against a sliding window (the system prompt and the newest
whole turns that fit the budget), the baseline of the targets; "no
compaction" sends everything.

The clients, each with chatfold's defaults and with `--fold-to` equal to the
budget (folding only as far as needed on every request, chatfold's behaviour
before the fold target):
- cli+cache: a client that resends its whole transcript, through
  `chatfold compact --cache-dir DIR`, one process a request;
- cli feedback: a client that sends back what chatfold returned, plus the
  new messages (`chatfold compact`, no cache);
- serve chat / anthropic / responses: a client that resends its whole
  transcript through `chatfold serve` (in front of a fake upstream on
  loopback, whose received bodies are measured), in each API's format;
- rolling / tiered: the Python package's memories, the context they return
  (`messages()`) sent each time. The rolling memory's buffer gets three
  quarters of the budget and its summary a quarter (`max_summary_tokens`),
  so that the whole stays within it, and folds down to the target's share
  of its buffer; the tiered memory's hard limit is the budget and its soft
  limit half of it, folded down to half the soft limit in one call by
  default, and with `--fold-to` equal to the budget as sawtooth does
  (chunks of 10 messages, back to just under the soft limit).
"""

import argparse
import http.server
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import threading
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benches" / "peers"))
from compare import target_dir, tiktoken_cache  # noqa: E402

SYSTEM = "You are an SRE agent for the payments platform. Use the tools; quote ids exactly."
WORDS = (
    "deploy rollback latency queue shard replica timeout retry cache index lease budget alert incident "
    "runbook canary region cluster node pod volume quota ingress gateway token cert rotation backlog "
    "throughput error spike window baseline dashboard metric trace span sample owner oncall escalation"
).split()


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def session(turns, seed=7):
    """The session as events: ("user", text), ("calls", [(id, name, args)]),
    ("results", [(id, text)]), ("answer", text)."""
    rng = random.Random(seed)
    events = []
    for t in range(turns):
        host = "db-%02d.prod-eu" % rng.randrange(40)
        events.append(("user", "Turn %d: %s Check %s, ticket OPS-%d. %s" % (
            t, sentence(rng, rng.randrange(8, 30)), host, 4000 + t, sentence(rng, rng.randrange(5, 20)))))
        if rng.random() < 0.7:
            calls = [("call_%d_%d" % (t, k), rng.choice(["read_logs", "query_metrics", "describe_pod"]),
                      json.dumps({"target": host, "window": "%dm" % rng.choice([5, 15, 60])}))
                     for k in range(rng.choice([1, 1, 2]))]
            events.append(("calls", calls))
            events.append(("results", [(cid, "%s: req-%08x %s" % (name, rng.getrandbits(32),
                                                                   " ".join(sentence(rng, 12) for _ in range(rng.randrange(3, 12)))))
                                       for cid, name, _ in calls]))
        events.append(("answer", "%s %s" % (sentence(rng, rng.randrange(10, 40)), sentence(rng, 8))))
    return events


def openai_messages(events):
    """The transcript before each model call, in Chat Completions' format."""
    messages = [{"role": "system", "content": SYSTEM}]
    requests = []
    for kind, value in events:
        if kind == "user":
            messages.append({"role": "user", "content": value})
            requests.append(len(messages))
        elif kind == "calls":
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}} for cid, name, args in value]})
        elif kind == "results":
            messages += [{"role": "tool", "tool_call_id": cid, "content": text} for cid, text in value]
            requests.append(len(messages))
        else:
            messages.append({"role": "assistant", "content": value})
    return messages, requests


def anthropic_body(messages):
    """A Chat Completions transcript as an Anthropic Messages body."""
    out = []
    for m in messages[1:]:
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.get("tool_calls"):
            out.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": json.loads(c["function"]["arguments"])}
                for c in m["tool_calls"]]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "messages": out}


def responses_body(messages):
    items = []
    for m in messages[1:]:
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        elif m.get("tool_calls"):
            items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                       "arguments": c["function"]["arguments"]} for c in m["tool_calls"]]
        else:
            items.append({"role": m["role"], "content": m["content"]})
    return {"model": "gpt-4o", "instructions": SYSTEM, "input": items}


class Counter:
    """Tokens of a request's units (messages, blocks, items) with o200k."""

    def __init__(self):
        import tiktoken
        self.enc = tiktoken.get_encoding("o200k_base")
        self.memo = {}

    def units(self, body):
        """A request as its leading units: a body's system prompt, then its
        messages (or items), each as canonical JSON."""
        if isinstance(body, list):
            return [json.dumps(m, sort_keys=True) for m in body]
        head = []
        for key in ("system", "instructions"):
            value = body.get(key)
            if isinstance(value, list):
                head += [json.dumps(v, sort_keys=True) for v in value]
            elif value is not None:
                head.append(json.dumps(value))
        listed = body.get("messages", body.get("input", []))
        return head + [json.dumps(m, sort_keys=True) for m in listed]

    def tokens(self, unit):
        """As chat accounting counts a message: 3, and the text it carries
        (every string but the field names and block types)."""
        if unit not in self.memo:
            texts = []

            def walk(v, key=None):
                if isinstance(v, str) and key != "type":
                    texts.append(v)
                elif isinstance(v, dict):
                    for k, x in v.items():
                        walk(x, k)
                elif isinstance(v, list):
                    for x in v:
                        walk(x)

            walk(json.loads(unit))
            self.memo[unit] = 3 + sum(len(self.enc.encode(t, disallowed_special=())) for t in texts)
        return self.memo[unit]


class Meter:
    """A client's requests as a provider bills them."""

    def __init__(self, counter):
        self.counter, self.previous = counter, []
        self.sent = self.cached = 0
        self.anthropic = self.openai = 0.0
        self.requests = self.summarizer_calls = 0
        self.largest = 0

    def send(self, body):
        units = self.counter.units(body)
        tokens = [self.counter.tokens(u) for u in units]
        same = 0
        for a, b in zip(units, self.previous):
            if a != b:
                break
            same += 1
        cached, total = sum(tokens[:same]), sum(tokens)
        self.previous = units
        self.requests += 1
        self.sent += total
        self.cached += cached
        self.largest = max(self.largest, total)
        self.anthropic += 0.1 * cached + 1.25 * (total - cached)
        openai_cached = cached if cached >= 1024 else 0
        self.openai += 0.1 * openai_cached + (total - openai_cached)
        return total

    def row(self, name, window):
        return {
            "client": name,
            "tokens a request": round(self.sent / self.requests),
            "largest": self.largest,
            "cache-hit share": self.cached / self.sent,
            "Anthropic cost": self.anthropic / window.anthropic,
            "OpenAI cost": self.openai / window.openai,
            "summarizer calls": self.summarizer_calls,
            "requests": self.requests,
        }


def window_request(messages, budget, counter):
    """The system prompt and the newest whole turns (from a user turn) that fit."""
    body = [messages[0]]
    used = counter.tokens(json.dumps(messages[0], sort_keys=True))
    starts = [i for i in range(1, len(messages)) if messages[i]["role"] == "user"]
    keep = len(messages)
    for s in reversed(starts):
        cost = sum(counter.tokens(json.dumps(m, sort_keys=True)) for m in messages[s:keep])
        if used + cost > budget:
            break
        used += cost
        keep = s
    if keep == len(messages):
        keep = starts[-1] if starts else 1
    return body + messages[keep:]


def binary():
    target = target_dir()
    found = [p for p in (target / "release" / "chatfold", target / "debug" / "chatfold") if p.exists()]
    if not found:
        sys.exit("no chatfold binary: run `cargo build --features cli` first")
    return str(max(found, key=lambda p: p.stat().st_mtime))


def cli(exe, args, history, report):
    out = subprocess.run([exe, "compact", *args, "--report", report, "-"], input=json.dumps(history).encode(),
                         capture_output=True, check=True)
    folds = json.loads(pathlib.Path(report).read_text()).get("folds", 0)
    return json.loads(out.stdout), folds


def cli_clients(exe, messages, requests, budget, fold_to, counter, tmp):
    args = ["--budget", str(budget), "--fold-to", fold_to]
    cached, feedback = Meter(counter), Meter(counter)
    cache_dir = tempfile.mkdtemp(dir=tmp)
    report = os.path.join(tmp, "report.json")
    held, seen = None, 0
    for n in requests:
        out, folds = cli(exe, [*args, "--cache-dir", cache_dir], messages[:n], report)
        cached.send(out)
        cached.summarizer_calls += folds
        held = messages[:n] if held is None else held + messages[seen:n]
        out, folds = cli(exe, args, held, report)
        feedback.send(out)
        feedback.summarizer_calls += folds
        held, seen = out, n
    return cached, feedback


class Upstream(http.server.ThreadingHTTPServer):
    """A fake LLM API on loopback: records each body, answers briefly."""

    def __init__(self):
        self.bodies = []
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.bodies.append(body)
        payload = json.dumps({"id": "x", "object": "chat.completion", "choices": [], "content": [], "output": []}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve_clients(exe, messages, requests, budget, fold_to, counter):
    upstream = Upstream()
    proxy = subprocess.Popen([exe, "serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:%d" % upstream.server_address[1],
                              "--budget", str(budget), "--fold-to", fold_to], stderr=subprocess.PIPE, text=True)
    line = proxy.stderr.readline()
    url = line.rsplit(" ", 1)[-1].strip()
    threading.Thread(target=lambda: [None for _ in proxy.stderr], daemon=True).start()
    meters = {}
    try:
        for route, path, shape in (("chat", "/v1/chat/completions", lambda m: {"model": "gpt-4o", "messages": m}),
                                   ("anthropic", "/v1/messages", anthropic_body),
                                   ("responses", "/v1/responses", responses_body)):
            meter = Meter(counter)
            for n in requests:
                request = urllib.request.Request(url + path, data=json.dumps(shape(messages[:n])).encode(),
                                                 headers={"content-type": "application/json", "authorization": "Bearer k",
                                                          "x-api-key": "k", "anthropic-version": "2023-06-01"})
                with urllib.request.urlopen(request) as response:
                    response.read()
                    meter.summarizer_calls += response.headers.get("x-chatfold-cache") == "miss"
                meter.send(upstream.bodies[-1])
            meters[route] = meter
    finally:
        proxy.terminate()
        proxy.wait()
        upstream.shutdown()
    return meters


def memory_clients(messages, requests, budget, fold_to, counter):
    """The rolling memory and the tiered one, within `budget`, folding as
    the target `fold_to` says (see the module's docs)."""
    try:
        from chatfold import memory
    except ImportError as e:
        print("the memories' rows are skipped: %s" % e, file=sys.stderr)
        return {}
    import asyncio

    calls = {"n": 0}

    def summarize(request):
        calls["n"] += 1
        return request._extractive()

    async def run(name, m):
        calls["n"] = 0
        meter, seen = Meter(counter), 1
        if name == "tiered":
            m.start()
        for n in requests:
            for message in messages[seen:n]:
                m.add_message(message)
            seen = n
            await asyncio.sleep(0)
            meter.send(list(m.messages()))
        if name == "tiered":
            await m.stop()
        meter.summarizer_calls = calls["n"]
        return meter

    buffer = budget * 3 // 4
    rolling = memory.RollingMemory(
        max_tokens=buffer, low_water=max(1, fold_to * 3 // 4), max_summary_tokens=budget // 4, summarize=summarize
    )
    rolling.add_system(SYSTEM)
    soft = budget // 2
    sawtooth = {"low_water": soft, "chunk_size": 10} if fold_to >= budget else {}
    tiered = memory.TieredMemory(soft, budget, summarize, system=[{"role": "system", "content": SYSTEM}], **sawtooth)
    return {name: asyncio.run(run(name, m)) for name, m in (("rolling", rolling), ("tiered", tiered))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--fold-to", default="50%,100%", help="targets to compare, comma-separated")
    parser.add_argument("--quick", action="store_true", help="60 turns")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    turns = 60 if args.quick else args.turns
    exe = binary()
    with tempfile.TemporaryDirectory() as tmp:
        tiktoken_cache(tmp)
        counter = Counter()
        messages, requests = openai_messages(session(turns))
        window, whole = Meter(counter), Meter(counter)
        for n in requests:
            window.send(window_request(messages[:n], args.budget, counter))
            whole.send(messages[:n])
        rows = [window.row("sliding window", window), whole.row("no compaction", window)]
        for fold_to in args.fold_to.split(","):
            tag = " (fold to %s)" % fold_to
            budget_tokens = args.budget
            target = budget_tokens * int(fold_to[:-1]) // 100 if fold_to.endswith("%") else int(fold_to)
            cached, feedback = cli_clients(exe, messages, requests, args.budget, fold_to, counter, tmp)
            rows += [cached.row("cli+cache" + tag, window), feedback.row("cli feedback" + tag, window)]
            for route, meter in serve_clients(exe, messages, requests, args.budget, fold_to, counter).items():
                rows.append(meter.row("serve " + route + tag, window))
            for name, meter in memory_clients(messages, requests, args.budget, target, counter).items():
                rows.append(meter.row(name + tag, window))
    print("%d turns, %d requests, budget %d (o200k), %s" % (turns, len(requests), args.budget, exe))
    print()
    print("| client | tokens a request | largest | cache-hit share | Anthropic cost | OpenAI cost | summarizer calls |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %d | %d | %.0f%% | %.2fx | %.2fx | %d |" % (
            r["client"], r["tokens a request"], r["largest"], 100 * r["cache-hit share"], r["Anthropic cost"],
            r["OpenAI cost"], r["summarizer calls"]))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
