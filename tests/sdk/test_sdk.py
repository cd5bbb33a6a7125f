"""The official `openai` and `anthropic` Python SDKs drive `chatfold serve`
in front of a fake upstream on loopback.

Run by `.ci/run` in a virtual environment with both SDKs installed:

    python tests/sdk/test_sdk.py [path/to/chatfold]

The proxy binary is the argument, else $CHATFOLD_BIN, else
target/debug/chatfold. Every test prints its name; any failure exits 1.
"""

import http.server
import json
import os
import subprocess
import sys
import threading

import anthropic
import openai

BUDGET = 600
SUMMARY_PREFIX = "Summary of earlier conversation:"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Upstream(http.server.ThreadingHTTPServer):
    """Records every request; answers as OpenAI or Anthropic would."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen = []
        self.lock = threading.Lock()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


def sse(handler, events):
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("connection", "close")
    handler.end_headers()
    for event, data in events:
        if event:
            handler.wfile.write(("event: %s\n" % event).encode())
        handler.wfile.write(("data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data))).encode())
        handler.wfile.flush()


def openai_answer(body):
    if body.get("tools"):
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_new", "type": "function",
            "function": {"name": "read_logs", "arguments": "{\"host\": \"host-7\"}"}}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "Look at host-7 first."}
        finish = "stop"
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def openai_events(body):
    chunk = lambda delta, finish=None: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                                         "model": body["model"],
                                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return [(None, chunk({"role": "assistant", "content": "Look at "})), (None, chunk({"content": "host-7."})),
            (None, chunk({}, "stop")), (None, "[DONE]")]


def anthropic_answer(body):
    content = [{"type": "text", "text": "Look at host-7 first."}]
    stop = "end_turn"
    if body.get("tools"):
        content.append({"type": "tool_use", "id": "toolu_new", "name": "read_logs", "input": {"host": "host-7"}})
        stop = "tool_use"
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"], "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def anthropic_events(body):
    message = dict(anthropic_answer({"model": body["model"]}), content=[], stop_reason=None)
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Look at "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "host-7."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        with self.server.lock:
            self.server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, raw))
        body = json.loads(raw)
        if body["model"] == "rate-limited":
            payload = json.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}}).encode()
            self.send_response(429)
            self.send_header("retry-after", "3")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        chat = self.path.startswith("/v1/chat/completions")
        if body.get("stream"):
            return sse(self, openai_events(body) if chat else anthropic_events(body))
        payload = json.dumps(openai_answer(body) if chat else anthropic_answer(body)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


TOOLS_OPENAI = [{"type": "function", "function": {
    "name": "read_logs", "description": "Read a host's logs.",
    "parameters": {"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]}}}]
TOOLS_ANTHROPIC = [{"name": "read_logs", "description": "Read a host's logs.",
                    "input_schema": {"type": "object", "properties": {"host": {"type": "string"}}}}]


def openai_history(turns):
    messages = [{"role": "system", "content": "You are an SRE assistant."}]
    for i in range(turns):
        messages += [
            {"role": "user", "content": "Check the logs of host-%d in cluster prod-eu, please." % i},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_%d" % i, "type": "function",
             "function": {"name": "read_logs", "arguments": json.dumps({"host": "host-%d" % i})}}]},
            {"role": "tool", "tool_call_id": "call_%d" % i,
             "content": "host-%d: 3 errors in the last hour, see ticket OPS-%d" % (i, 1000 + i)},
            {"role": "assistant", "content": "Host %d logged 3 errors (OPS-%d)." % (i, 1000 + i)},
        ]
    messages.append({"role": "user", "content": "Which host should I look at first?"})
    return messages


def anthropic_history(turns):
    messages = []
    for i in range(turns):
        messages += [
            {"role": "user", "content": "Check the logs of host-%d in cluster prod-eu, please." % i},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading them."},
                {"type": "tool_use", "id": "toolu_%d" % i, "name": "read_logs", "input": {"host": "host-%d" % i}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_%d" % i,
                                          "content": "host-%d: 3 errors, see ticket OPS-%d" % (i, 1000 + i)}]},
            {"role": "assistant", "content": "Host %d logged 3 errors (OPS-%d)." % (i, 1000 + i)},
        ]
    messages.append({"role": "user", "content": "Which host should I look at first?"})
    return messages


def check_openai_request(body):
    """Tool pairs intact and one summary, as OpenAI checks a request."""
    messages = body["messages"]
    summaries = [m for m in messages if isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX)]
    assert len(summaries) == 1, messages
    assert messages[0] == {"role": "system", "content": "You are an SRE assistant."}
    open_calls = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, "a result without its call"
            open_calls.remove(m["tool_call_id"])
        else:
            assert not open_calls, "calls left unanswered"
            open_calls += [c["id"] for c in m.get("tool_calls") or []]
    assert not open_calls


def check_anthropic_request(body):
    """The first turn a user's, tool pairs intact, the summary in system."""
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    assert json.dumps(body["system"]).count(SUMMARY_PREFIX) == 1
    blocks = lambda m, kind, key: [b[key] for b in (m["content"] if isinstance(m["content"], list) else [])
                                   if b["type"] == kind]
    for i, m in enumerate(messages):
        results = blocks(m, "tool_result", "tool_use_id")
        if results:
            assert i > 0 and blocks(messages[i - 1], "tool_use", "id") == results
        uses = blocks(m, "tool_use", "id")
        if uses:
            assert blocks(messages[i + 1], "tool_result", "tool_use_id") == uses


class Proxy:
    def __init__(self, binary, upstream):
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--upstream", upstream, "--budget", str(BUDGET)],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        line = self.process.stderr.readline()
        prefix = "chatfold serve: listening on "
        assert line.startswith(prefix), line
        self.url = line[len(prefix):].strip()
        # Keep reading its log so that it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    def stop(self):
        self.process.terminate()
        assert self.process.wait(timeout=60) == 0


def last_seen(upstream):
    path, headers, raw = upstream.seen[-1]
    return path, headers, json.loads(raw)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "CHATFOLD_BIN", os.path.join(ROOT, "target", "debug", "chatfold"))
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = Proxy(binary, upstream.url)
    oa = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-openai", max_retries=0)
    an = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)
    failures = 0

    def test(fn):
        nonlocal failures
        try:
            fn()
            print("ok   %s" % fn.__name__)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next test runs
            failures += 1
            print("FAIL %s: %r" % (fn.__name__, e))

    @test
    def openai_small_request_passes_untouched():
        messages = [{"role": "user", "content": "Hello there"}]
        raw = oa.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)
        assert raw.headers["x-chatfold-summarized"] == "false"
        assert raw.parse().choices[0].message.content == "Look at host-7 first."
        path, headers, body = last_seen(upstream)
        assert path == "/v1/chat/completions" and body["messages"] == messages
        assert headers["authorization"] == "Bearer sk-test-openai"

    @test
    def openai_over_budget_with_tool_calls():
        raw = oa.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=openai_history(30), tools=TOOLS_OPENAI)
        assert raw.headers["x-chatfold-summarized"] == "true"
        assert int(raw.headers["x-chatfold-tokens-after"]) <= BUDGET
        completion = raw.parse()
        call = completion.choices[0].message.tool_calls[0]
        assert call.function.name == "read_logs" and json.loads(call.function.arguments) == {"host": "host-7"}
        _, _, body = last_seen(upstream)
        check_openai_request(body)
        assert body["tools"] == TOOLS_OPENAI
        assert len(body["messages"]) < len(openai_history(30))

    @test
    def openai_over_budget_streaming():
        stream = oa.chat.completions.create(model="gpt-4o", messages=openai_history(30), stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == "Look at host-7.", text
        _, _, body = last_seen(upstream)
        assert body["stream"] is True
        check_openai_request(body)

    @test
    def openai_rate_limit_passes_through():
        try:
            oa.chat.completions.create(model="rate-limited", messages=[{"role": "user", "content": "hi"}])
        except openai.RateLimitError as e:
            assert e.response.headers["retry-after"] == "3"
        else:
            raise AssertionError("no RateLimitError")

    @test
    def anthropic_small_request_passes_untouched():
        message = an.messages.create(model="claude-test", max_tokens=64,
                                     messages=[{"role": "user", "content": "Hello there"}])
        assert message.content[0].text == "Look at host-7 first."
        path, headers, body = last_seen(upstream)
        assert path == "/v1/messages"
        # Older SDKs send x-api-key, newer ones a bearer token: either reaches the upstream.
        assert "sk-ant-test" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
        assert body["messages"] == [{"role": "user", "content": "Hello there"}]

    @test
    def anthropic_over_budget_with_tool_use():
        raw = an.messages.with_raw_response.create(
            model="claude-test", max_tokens=256, system="You are an SRE assistant.",
            messages=anthropic_history(30), tools=TOOLS_ANTHROPIC)
        assert raw.headers["x-chatfold-summarized"] == "true"
        assert int(raw.headers["x-chatfold-tokens-after"]) <= BUDGET
        message = raw.parse()
        assert message.stop_reason == "tool_use" and message.content[1].input == {"host": "host-7"}
        _, _, body = last_seen(upstream)
        check_anthropic_request(body)
        assert "You are an SRE assistant." in json.dumps(body["system"])
        assert body["tools"] == TOOLS_ANTHROPIC

    @test
    def anthropic_over_budget_streaming():
        with an.messages.stream(model="claude-test", max_tokens=256, system="You are an SRE assistant.",
                                messages=anthropic_history(30)) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == "Look at host-7." and final.stop_reason == "end_turn"
        _, _, body = last_seen(upstream)
        check_anthropic_request(body)

    @test
    def anthropic_sdk_reads_the_proxys_own_error():
        history = anthropic_history(30)
        del history[2]["content"][0]["tool_use_id"]
        try:
            an.messages.create(model="claude-test", max_tokens=64, messages=history)
        except anthropic.BadRequestError as e:
            assert e.body["error"]["type"] == "invalid_request_error"
            assert "tool_use_id" in e.body["error"]["message"]
        else:
            raise AssertionError("no BadRequestError")

    proxy.stop()
    upstream.shutdown()
    if failures:
        print("%d SDK test(s) failed" % failures)
        sys.exit(1)
    print("all SDK tests passed")


if __name__ == "__main__":
    main()
