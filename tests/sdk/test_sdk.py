"""The official `openai` and `anthropic` Python SDKs, and the OpenAI Agents
SDK, drive `chatfold serve` in front of a fake upstream on loopback: Chat
Completions, Anthropic's Messages and OpenAI's Responses API, with its
compaction (`responses.compact`, `context_management`) answered by chatfold
for an upstream that has none.

Run by `.ci/run` in a virtual environment with both SDKs installed:

    python tests/sdk/test_sdk.py [path/to/chatfold]

The proxy binary is the argument, else $CHATFOLD_BIN, else
target/debug/chatfold. Every test prints its name; any failure exits 1.
"""

import http.server
import itertools
import json
import os
import subprocess
import sys
import threading
import warnings

import anthropic
import openai

# The SDKs' models warn when they dump an item they parsed loosely; the tests
# compare the dumps themselves.
warnings.filterwarnings("ignore", category=UserWarning, module="pydantic")

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


ANSWERS = itertools.count(1)


def responses_answer(body):
    """A Responses API answer: a function call when tools are offered and the
    last item is not a function's output, else text."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    answered = bool(items) and items[-1].get("type") == "function_call_output"
    n = next(ANSWERS)
    if body.get("tools") and not answered:
        output = [{"type": "function_call", "id": "fc_new%d" % n, "call_id": "call_new%d" % n, "name": "read_logs",
                   "arguments": "{\"host\": \"host-7\"}", "status": "completed"}]
    else:
        output = [{"type": "message", "id": "msg_new%d" % n, "status": "completed", "role": "assistant",
                   "content": [{"type": "output_text", "text": "Look at host-7 first.", "annotations": []}]}]
    return {"id": "resp_%d" % n, "object": "response", "created_at": 1, "status": "completed", "model": body["model"],
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": body.get("tools", []),
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def responses_events(body):
    """The events of a streamed Responses API answer, as OpenAI sends them."""
    message = {"id": "msg_new", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    done = dict(message, status="completed",
                content=[{"type": "output_text", "text": "Look at host-7.", "annotations": []}])
    final = dict(responses_answer({"model": body["model"]}), output=[done])
    started = dict(final, status="in_progress", output=[])
    where = {"item_id": "msg_new", "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": message},
        dict(where, type="response.content_part.added", part={"type": "output_text", "text": "", "annotations": []}),
        dict(where, type="response.output_text.delta", delta="Look at ", logprobs=[]),
        dict(where, type="response.output_text.delta", delta="host-7.", logprobs=[]),
        dict(where, type="response.output_text.done", text="Look at host-7.", logprobs=[]),
        dict(where, type="response.content_part.done", part=done["content"][0]),
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": final},
    ]
    return [(e["type"], dict(e, sequence_number=n)) for n, e in enumerate(events)]


def responses_refusal(body):
    """Why the fake Responses upstream (not OpenAI) refuses a body, if it does:
    it supports no compaction, and reads no item it did not make."""
    if "context_management" in body:
        return "context_management is not supported"
    items = body.get("input") if isinstance(body.get("input"), list) else []
    if any(item.get("type") == "compaction" for item in items):
        return "unknown input item type: compaction"
    return None


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
        if self.path.startswith("/v1/responses"):
            return self.responses_api(body)
        chat = self.path.startswith("/v1/chat/completions")
        if body.get("stream"):
            return sse(self, openai_events(body) if chat else anthropic_events(body))
        self.answer(200, openai_answer(body) if chat else anthropic_answer(body))

    def responses_api(self, body):
        if self.path != "/v1/responses":
            return self.answer(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
        refusal = responses_refusal(body)
        if refusal:
            return self.answer(400, {"error": {"message": refusal, "type": "invalid_request_error",
                                             "param": None, "code": None}})
        if body.get("stream"):
            return sse(self, responses_events(body))
        self.answer(200, responses_answer(body))

    def answer(self, status, value):
        payload = json.dumps(value).encode()
        self.send_response(status)
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


def responses_history(turns):
    """Items as the Agents SDK keeps them: reasoning, parallel calls, outputs."""
    items = []
    for i in range(turns):
        items.append({"content": "Check the logs of host-%d and host-%d in prod-eu, please." % (i, i + 100),
                      "role": "user"})
        items.append({"id": "rs_%d" % i, "summary": [{"text": "Two hosts: two reads.", "type": "summary_text"}],
                      "type": "reasoning", "encrypted_content": "gAAAAB-opaque-%d" % i})
        for host in (i, i + 100):
            items.append({"arguments": json.dumps({"host": "host-%d" % host}), "call_id": "call_%d" % host,
                          "name": "read_logs", "type": "function_call", "id": "fc_%d" % host,
                          "status": "completed"})
        for host in (i, i + 100):
            items.append({"call_id": "call_%d" % host, "output": "host-%d: 3 errors, see ticket OPS-%d" % (host, 1000 + host),
                          "type": "function_call_output"})
        items.append({"id": "msg_%d" % i, "content": [{"annotations": [], "text": "Both logged 3 errors (OPS-%d)." % (1000 + i),
                      "type": "output_text"}], "role": "assistant", "status": "completed", "type": "message"})
    items.append({"content": "Which host should I look at first?", "role": "user"})
    return items


TOOLS_RESPONSES = [{"type": "function", "name": "read_logs", "description": "Read a host's logs.",
                    "parameters": {"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]}}]


def check_responses_request(body, sent):
    """One summary item first, then items exactly as sent: every output after
    its call, every call kept with its outputs, reasoning before what it led to."""
    items = body["input"]
    assert body["instructions"] == "You are an SRE assistant."
    assert items[0]["role"] == "system" and items[0]["content"].startswith(SUMMARY_PREFIX), items[0]
    assert sum(json.dumps(item).count(SUMMARY_PREFIX) for item in items) == 1
    kept = items[1:]
    assert kept == sent[len(sent) - len(kept):], "the kept items are the latest ones, unchanged"
    calls = {item["call_id"] for item in kept if item.get("type") == "function_call"}
    outputs = {item["call_id"] for item in kept if item.get("type") == "function_call_output"}
    assert calls == outputs, (calls, outputs)
    for i, item in enumerate(kept):
        if item.get("type") == "function_call_output":
            assert any(c.get("call_id") == item["call_id"] for c in kept[:i] if c.get("type") == "function_call")
        if item.get("type") == "reasoning":
            assert kept[i + 1].get("type") == "function_call"


def check_no_compaction_upstream(body):
    """Nothing the fake upstream cannot read: no compaction item, no
    context_management."""
    assert "context_management" not in body
    items = body["input"] if isinstance(body["input"], list) else []
    assert not [item for item in items if item.get("type") == "compaction"], items


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
    def __init__(self, binary, upstream, *flags):
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--upstream", upstream, "--budget", str(BUDGET), *flags],
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


class Tests:
    """Runs each function it decorates at once, printing its name and
    whether it passed; counts the failures (every one is reported, then the
    next test runs)."""

    def __init__(self):
        self.failures = 0

    def __call__(self, fn):
        try:
            fn()
            print("ok   %s" % fn.__name__)
        except Exception as e:  # noqa: BLE001
            self.failures += 1
            print("FAIL %s: %r" % (fn.__name__, e))
        return fn


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
    test = Tests()

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
    def anthropic_cache_breakpoints_move_to_the_summary_and_the_prefix_is_kept():
        # The client marks an early (folded) turn, its system prompt and its
        # latest turn; the summary takes the folded breakpoint, within 4.
        def marked(turns):
            messages = anthropic_history(turns)
            messages[0]["content"] = [{"type": "text", "text": messages[0]["content"],
                                       "cache_control": {"type": "ephemeral"}}]
            messages[-1]["content"] = [{"type": "text", "text": messages[-1]["content"],
                                        "cache_control": {"type": "ephemeral"}}]
            return messages
        system = [{"type": "text", "text": "You are an SRE assistant.", "cache_control": {"type": "ephemeral"}}]
        raw = an.messages.with_raw_response.create(model="claude-test", max_tokens=256, system=system,
                                                   messages=marked(30), tools=TOOLS_ANTHROPIC)
        assert raw.headers["x-chatfold-summarized"] == "true"
        assert raw.headers["x-chatfold-prefix"] == "rewritten"
        _, _, first = last_seen(upstream)
        check_anthropic_request(first)
        summary = first["system"][-1]
        assert summary["text"].startswith("Summary of earlier conversation")
        assert summary["cache_control"] == {"type": "ephemeral"}
        assert json.dumps(first).count('"cache_control"') <= 4
        assert first["system"][0] == system[0]
        # One exchange later: the same summary block, the prompt extended.
        later = marked(30)
        later[-1]["content"][0].pop("cache_control")
        later += [{"role": "assistant", "content": "Start with host-7."},
                  {"role": "user", "content": [{"type": "text", "text": "Why that one?",
                                                "cache_control": {"type": "ephemeral"}}]}]
        raw = an.messages.with_raw_response.create(model="claude-test", max_tokens=256, system=system,
                                                   messages=later, tools=TOOLS_ANTHROPIC)
        assert raw.headers["x-chatfold-prefix"] == "kept", raw.headers.get("x-chatfold-prefix")
        _, _, second = last_seen(upstream)
        assert second["system"] == first["system"]
        kept = len(first["messages"]) - 1
        assert second["messages"][:kept] == first["messages"][:kept]

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

    @test
    def responses_small_request_passes_untouched():
        raw = oa.responses.with_raw_response.create(model="gpt-5", input="Hello there")
        assert raw.headers["x-chatfold-summarized"] == "false"
        assert raw.parse().output_text == "Look at host-7 first."
        path, _, body = last_seen(upstream)
        assert path == "/v1/responses" and body["input"] == "Hello there"

    @test
    def responses_over_budget_with_parallel_calls_and_reasoning():
        sent = responses_history(30)
        raw = oa.responses.with_raw_response.create(
            model="gpt-5", instructions="You are an SRE assistant.", input=sent, tools=TOOLS_RESPONSES,
            include=["reasoning.encrypted_content"], store=False)
        assert raw.headers["x-chatfold-summarized"] == "true"
        assert int(raw.headers["x-chatfold-tokens-after"]) <= BUDGET
        response = raw.parse()
        assert response.output[0].type == "function_call" and response.output[0].name == "read_logs"
        _, _, body = last_seen(upstream)
        check_responses_request(body, sent)
        assert body["tools"] == TOOLS_RESPONSES and body["store"] is False
        assert "gAAAAB-opaque-0" not in json.dumps(body["input"][0]), "ciphertext never reaches a summary"

    @test
    def responses_over_budget_streaming():
        sent = responses_history(30)
        with oa.responses.stream(model="gpt-5", instructions="You are an SRE assistant.", input=sent) as stream:
            text = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
            final = stream.get_final_response()
        assert text == "Look at host-7." and final.output_text == "Look at host-7."
        _, _, body = last_seen(upstream)
        assert body["stream"] is True
        check_responses_request(body, sent)

    @test
    def responses_continuing_a_stored_response_pass_untouched():
        sent = responses_history(30)
        raw = oa.responses.with_raw_response.create(model="gpt-5", input=sent, previous_response_id="resp_0")
        assert raw.headers["x-chatfold-summarized"] == "false"
        _, _, body = last_seen(upstream)
        assert body["input"] == sent and body["previous_response_id"] == "resp_0"

    @test
    def responses_compact_is_answered_for_any_model():
        sent = responses_history(30)
        raw = oa.responses.with_raw_response.compact(model="gpt-5", instructions="You are an SRE assistant.",
                                                     input=sent)
        compacted = raw.parse()
        assert compacted.object == "response.compaction"
        assert [upstream.seen[-1][0]] == ["/v1/responses/compact"], "asked upstream first, which said 404"
        items = [item.model_dump(exclude_none=True) for item in compacted.output]
        # OpenAI's order: the kept items, then the one compaction item.
        assert items[-1]["type"] == "compaction" and items[-1]["encrypted_content"].startswith("chatfold.v1.")
        assert sum(item["type"] == "compaction" for item in items) == 1
        kept = items[:-1]
        assert 0 < len(kept) < len(sent)
        suffix = sent[len(sent) - len(kept):]
        for mine, theirs in zip(kept, suffix):
            if "type" in theirs:
                assert mine == theirs, "typed items (calls, outputs, reasoning) kept as they came"
            else:
                assert mine["type"] == "message" and mine["content"][0]["text"] == theirs["content"]
        assert compacted.usage.input_tokens > compacted.usage.output_tokens
        # The output goes back in a later request (whole, as a client that
        # replaces its window sends it; from the compaction item on; or with
        # the item first) and the upstream never sees the item.
        question = {"role": "user", "content": "And the second host?"}
        seen = []
        for follow in [items + [question], [items[-1], question], [items[-1]] + kept + [question]]:
            answer = oa.responses.create(model="gpt-5", instructions="You are an SRE assistant.", input=follow,
                                         tools=TOOLS_RESPONSES)
            assert answer.output[0].type == "function_call"
            _, _, body = last_seen(upstream)
            check_no_compaction_upstream(body)
            assert body["input"][0]["role"] == "system" and body["input"][0]["content"].startswith(SUMMARY_PREFIX)
            assert body["input"][1:] == kept + [question], "the item stands for the summary and the kept items"
            seen.append(body["input"])
        assert seen[0] == seen[1] == seen[2]

    @test
    def forged_altered_and_foreign_items_are_refused():
        compacted = oa.responses.compact(model="gpt-5", input=responses_history(30))
        item = compacted.output[-1].model_dump(exclude_none=True)
        content = item["encrypted_content"]
        altered = dict(item, encrypted_content=content[:20] + ("A" if content[20] != "A" else "B") + content[21:])
        other = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-another-tenant", max_retries=0)
        openai_own = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAABo-opaque"}
        for client, bad, words in [(oa, altered, "altered"), (other, item, "another tenant"),
                                   (oa, openai_own, "OpenAI")]:
            seen = len(upstream.seen)
            try:
                client.responses.create(model="gpt-5", input=[bad, {"role": "user", "content": "go on"}])
            except openai.BadRequestError as e:
                assert words in e.body["message"] if isinstance(e.body, dict) and "message" in e.body \
                    else words in str(e), e
            else:
                raise AssertionError("accepted %r" % bad)
            assert len(upstream.seen) == seen, "nothing reached the upstream"

    @test
    def context_management_is_honoured_and_removed():
        sent = responses_history(30)
        raw = oa.responses.with_raw_response.create(
            model="gpt-5", instructions="You are an SRE assistant.", input=sent,
            context_management=[{"type": "compaction", "compact_threshold": 400}])
        assert raw.headers["x-chatfold-summarized"] == "true"
        assert int(raw.headers["x-chatfold-tokens-after"]) <= 400
        response = raw.parse()
        assert [item.type for item in response.output] == ["compaction", "message"]
        _, _, body = last_seen(upstream)
        check_no_compaction_upstream(body)
        check_responses_request(body, sent)
        # As with OpenAI: append the output, drop what came before the newest compaction item.
        follow = [item.model_dump(exclude_none=True) for item in response.output] + [
            {"role": "user", "content": "And the second host?"}]
        oa.responses.create(model="gpt-5", instructions="You are an SRE assistant.", input=follow,
                            context_management=[{"type": "compaction", "compact_threshold": 400}])
        _, _, again = last_seen(upstream)
        check_no_compaction_upstream(again)
        assert again["input"][0]["content"].startswith(SUMMARY_PREFIX)
        assert again["input"][-2:] == follow[-2:], "the turn after the item as sent"
        # Under its threshold: nothing compacted, the field still removed, no item.
        small = oa.responses.create(model="gpt-5", input="Hello there",
                                    context_management=[{"type": "compaction", "compact_threshold": 400}])
        assert [item.type for item in small.output] == ["message"]
        _, _, body = last_seen(upstream)
        assert body == {"model": "gpt-5", "input": "Hello there"}

    @test
    def context_management_when_streaming():
        sent = responses_history(30)
        with oa.responses.stream(model="gpt-5", instructions="You are an SRE assistant.", input=sent,
                                 context_management=[{"type": "compaction", "compact_threshold": 400}]) as stream:
            events = list(stream)
            final = stream.get_final_response()
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "Look at host-7." and final.output_text == "Look at host-7."
        assert [item.type for item in final.output] == ["compaction", "message"]
        added = [e for e in events if e.type == "response.output_item.added"]
        assert [(e.output_index, e.item.type) for e in added] == [(0, "compaction"), (1, "message")]
        numbers = [e.sequence_number for e in events]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
        _, _, body = last_seen(upstream)
        check_no_compaction_upstream(body)

    @test
    def agents_sdk_compaction_session_and_runner_with_tools():
        import asyncio

        from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, function_tool, set_tracing_disabled
        from agents.memory import OpenAIResponsesCompactionSession

        set_tracing_disabled(True)
        client = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test-openai", max_retries=0)

        @function_tool
        def read_logs(host: str) -> str:
            """Read a host's logs."""
            return "%s: 3 errors in the last hour, see ticket OPS-%d" % (host, 4000 + len(host))

        agent = Agent(name="sre", instructions="You are an SRE assistant.", tools=[read_logs],
                      model=OpenAIResponsesModel(model="gpt-5", openai_client=client))

        async def run():
            session = OpenAIResponsesCompactionSession(
                "sre-1", SQLiteSession("sre-1"), client=client, model="gpt-5", compaction_mode="input")
            start = len(upstream.seen)
            for turn in range(14):
                result = await Runner.run(agent, "Check host-%d in prod-eu, please." % turn, session=session)
                assert result.final_output == "Look at host-7 first."
            items = await session.get_items()
            return start, items

        start, items = asyncio.run(run())
        paths = [path for path, _, _ in upstream.seen[start:]]
        assert "/v1/responses/compact" in paths, paths
        assert sum(item.get("type") == "compaction" for item in items) == 1, items
        for path, _, raw in upstream.seen[start:]:
            if path != "/v1/responses":
                continue
            body = json.loads(raw)
            check_no_compaction_upstream(body)
            kept = body["input"]
            calls = {i["call_id"] for i in kept if i.get("type") == "function_call"}
            outputs = {i["call_id"] for i in kept if i.get("type") == "function_call_output"}
            assert outputs <= calls, "an output without its call"

    proxy.stop()
    upstream.shutdown()
    if test.failures:
        print("%d SDK test(s) failed" % test.failures)
        sys.exit(1)
    print("all SDK tests passed")


if __name__ == "__main__":
    main()
