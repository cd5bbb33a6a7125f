"""chatfold.litellm.ChatfoldHook in LiteLLM: in its SDK (``litellm.callbacks``)
and in a real LiteLLM proxy started with the README's config, in front of a
fake upstream on loopback; driven by the openai and anthropic SDKs. Long
histories arrive compacted and valid, short ones byte for byte; a failing
summarizer never fails the request; streaming; the response headers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

# LiteLLM's model map from the package, not the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from chatfold import Compactor  # noqa: E402
from chatfold.litellm import ChatfoldHook  # noqa: E402

BUDGET = 600
PREFIX = "Summary of earlier conversation:"
MASTER_KEY = "sk-chatfold-test-9f3kd82lmq"


class Upstream(ThreadingHTTPServer):
    """OpenAI's and Anthropic's APIs, faked: records every request body."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen: List[Tuple[str, Dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.server_address[1]

    def last(self, path: str) -> Dict[str, Any]:
        return [body for p, body in self.seen if p.endswith(path)][-1]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def send(self, value: Any, status: int = 200) -> None:
        payload = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self.send({"object": "list", "data": []})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        self.server.seen.append((self.path, body))
        if self.path.endswith("/chat/completions"):
            if body.get("stream"):
                return self.stream(body)
            return self.send({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body["model"],
                              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Look at host-7."},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})
        if self.path.endswith("/messages"):
            return self.send({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                              "content": [{"type": "text", "text": "Look at host-7."}], "stop_reason": "end_turn",
                              "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 3}})
        if self.path.endswith("/responses"):
            return self.send({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
                              "model": body["model"], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                              "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                                          "content": [{"type": "output_text", "text": "Look at host-7.",
                                                       "annotations": []}]}],
                              "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}})
        self.send({"error": {"message": "unknown path " + self.path}}, 404)

    def stream(self, body: Dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for delta, finish in [({"role": "assistant", "content": "Look at "}, None), ({"content": "host-7."}, None), ({}, "stop")]:
            chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": body["model"],
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.wfile.write(("data: %s\n\n" % json.dumps(chunk)).encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def openai_history(turns: int) -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = [{"role": "system", "content": "You are an SRE assistant."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Check the logs of host-{i} in cluster prod-eu, please."})
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function",
                         "function": {"name": "read_logs", "arguments": json.dumps({"host": f"host-{i}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}",
                         "content": f"host-{i}: 3 errors in the last hour, see ticket OPS-{1000 + i}"})
        messages.append({"role": "assistant", "content": f"Host {i} logged 3 errors (OPS-{1000 + i})."})
    messages.append({"role": "user", "content": "Which host should I look at first?"})
    return messages


def anthropic_history(turns: int) -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"Check the logs of host-{i} in cluster prod-eu, please."})
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "read_logs", "input": {"host": f"host-{i}"}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                      "content": f"host-{i}: 3 errors, see ticket OPS-{1000 + i}"}]})
    messages.append({"role": "user", "content": "Which host should I look at first?"})
    return messages


def check_openai(messages: List[Dict[str, Any]], budget: int = BUDGET) -> None:
    """One summary, every tool call with its results, within the budget."""
    assert sum(1 for m in messages if str(m.get("content") or "").startswith(PREFIX)) == 1
    open_calls: List[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, m
            open_calls.remove(m["tool_call_id"])
        else:
            assert not open_calls, "a call without its result"
            open_calls = [c["id"] for c in m.get("tool_calls") or []]
    assert Compactor(budget).count(messages) <= budget


def check_anthropic(body: Dict[str, Any]) -> None:
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    for i, m in enumerate(messages):
        blocks = m["content"] if isinstance(m["content"], list) else []
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if uses:
            results = messages[i + 1]["content"]
            assert [b["tool_use_id"] for b in results if b.get("type") == "tool_result"] == uses


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


# -- the SDK ---------------------------------------------------------------


def test_the_sdk_compacts_long_histories_and_passes_short_ones(upstream: Upstream) -> None:
    hook = ChatfoldHook(budget=BUDGET)
    litellm.callbacks = [hook]
    try:
        short = [{"role": "user", "content": "Hello there"}]
        asyncio.run(litellm.acompletion(model="openai/fake", messages=short, api_base=upstream.url + "/v1", api_key="x"))
        assert upstream.last("/chat/completions")["messages"] == short
        asyncio.run(litellm.acompletion(model="openai/fake", messages=openai_history(30),
                                        api_base=upstream.url + "/v1", api_key="x"))
        check_openai(upstream.last("/chat/completions")["messages"])
        asyncio.run(litellm.anthropic_messages(model="anthropic/claude-fake", max_tokens=64,
                                               messages=anthropic_history(30), system="You are an SRE assistant.",
                                               api_base=upstream.url, api_key="x"))
        body = upstream.last("/messages")
        check_anthropic(body)
        assert PREFIX in json.dumps(body.get("system")) + json.dumps(body["messages"][0])
        items = [{"role": m["role"], "content": m["content"]} for m in openai_history(40)
                 if m["role"] in ("user", "assistant") and m.get("content")]
        asyncio.run(litellm.aresponses(model="openai/fake", input=items, api_base=upstream.url + "/v1", api_key="x"))
        sent = upstream.last("/responses")["input"]
        assert len(sent) < len(items) and PREFIX in json.dumps(sent)
        assert sent[-1]["content"] == items[-1]["content"]
    finally:
        litellm.callbacks = []


def test_a_failing_summarizer_never_fails_the_request(upstream: Upstream, caplog: pytest.LogCaptureFixture) -> None:
    def down(request: Any) -> str:
        raise RuntimeError("the summary model is down")

    hook = ChatfoldHook(budget=BUDGET, summarize=down)
    litellm.callbacks = [hook]
    try:
        with caplog.at_level("WARNING", logger="chatfold.litellm"):
            response = asyncio.run(litellm.acompletion(model="openai/fake", messages=openai_history(30),
                                                       api_base=upstream.url + "/v1", api_key="x"))
        assert response.choices[0].message.content == "Look at host-7."
        check_openai(upstream.last("/chat/completions")["messages"])
        assert any("summary model is down" in r.getMessage() for r in caplog.records)
    finally:
        litellm.callbacks = []


def test_budgets_per_model_and_from_the_model_map() -> None:
    hook = ChatfoldHook(model_budgets={"gpt-4o-mini*": 300, "claude-*": 900}, window_share=0.5)
    assert hook.budget_for("gpt-4o-mini-2024-07-18") == 300
    assert hook.budget_for("claude-fake") == 900
    assert hook.budget_for("gpt-4o") == litellm.get_model_info("gpt-4o")["max_input_tokens"] // 2
    assert hook.budget_for("no-such-model") is None
    with pytest.raises(Exception, match="budget"):
        ChatfoldHook()


# -- the proxy -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A LiteLLM proxy with the hook, as the README configures it."""
    folder = tmp_path_factory.mktemp("litellm")
    (folder / "custom_callbacks.py").write_text(textwrap.dedent(f"""
        from chatfold.litellm import ChatfoldHook

        def summarize(request):
            if "FAIL-SUMMARY" in request.transcript:
                raise RuntimeError("the summary model is down")
            return "The user asked about the hosts' logs; each had errors."

        chatfold_hook = ChatfoldHook(budget={BUDGET}, summarize=summarize)
    """))
    (folder / "config.yaml").write_text(textwrap.dedent(f"""
        model_list:
          - model_name: fake-gpt
            litellm_params: {{model: openai/fake, api_base: "{upstream.url}/v1", api_key: x}}
          - model_name: fake-claude
            litellm_params: {{model: anthropic/claude-fake, api_base: "{upstream.url}", api_key: x}}
        litellm_settings:
          callbacks: custom_callbacks.chatfold_hook
    """))
    port = free_port()
    env = dict(os.environ, LITELLM_MASTER_KEY=MASTER_KEY, LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONPATH=str(folder) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    litellm_bin = Path(sys.executable).with_name("litellm")
    process = subprocess.Popen([str(litellm_bin), "--config", str(folder / "config.yaml"), "--port", str(port),
                                "--host", "127.0.0.1"], cwd=folder, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=open(folder / "proxy.log", "w"))
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/health/liveliness", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                os.killpg(process.pid, signal.SIGKILL)
                raise AssertionError("the LiteLLM proxy did not start: " + (folder / "proxy.log").read_text()[-3000:])
            time.sleep(0.5)
    yield url
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def test_the_proxy_compacts_chat_completions_and_says_so(proxy: str, upstream: Upstream) -> None:
    client = openai.OpenAI(base_url=proxy + "/v1", api_key=MASTER_KEY, max_retries=0)
    short = [{"role": "user", "content": "Hello there"}]
    raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=short)
    assert raw.headers.get("x-chatfold-summarized") == "false"
    assert upstream.last("/chat/completions")["messages"] == short
    raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=openai_history(30))
    assert raw.parse().choices[0].message.content == "Look at host-7."
    assert raw.headers.get("x-chatfold-summarized") == "true"
    assert int(raw.headers["x-chatfold-tokens-after"]) <= BUDGET < int(raw.headers["x-chatfold-tokens-before"])
    sent = upstream.last("/chat/completions")["messages"]
    check_openai(sent)
    assert "each had errors" in json.dumps(sent)


def test_the_proxy_streams_a_compacted_request(proxy: str, upstream: Upstream) -> None:
    client = openai.OpenAI(base_url=proxy + "/v1", api_key=MASTER_KEY, max_retries=0)
    stream = client.chat.completions.create(model="fake-gpt", messages=openai_history(30), stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Look at host-7."
    body = upstream.last("/chat/completions")
    assert body["stream"] is True
    check_openai(body["messages"])


def test_the_proxy_falls_back_when_the_summarizer_fails(proxy: str, upstream: Upstream) -> None:
    client = openai.OpenAI(base_url=proxy + "/v1", api_key=MASTER_KEY, max_retries=0)
    history = openai_history(30)
    history[1]["content"] += " FAIL-SUMMARY"
    raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=history)
    assert raw.parse().choices[0].message.content == "Look at host-7."
    assert raw.headers.get("x-chatfold-summary") == "extractive"
    check_openai(upstream.last("/chat/completions")["messages"])


def test_the_proxy_compacts_anthropic_messages(proxy: str, upstream: Upstream) -> None:
    client = anthropic.Anthropic(base_url=proxy, api_key=MASTER_KEY, max_retries=0)
    message = client.messages.create(model="fake-claude", max_tokens=64, system="You are an SRE assistant.",
                                     messages=anthropic_history(30))
    assert message.content[0].text == "Look at host-7."
    body = upstream.last("/messages")
    check_anthropic(body)
    assert len(body["messages"]) < len(anthropic_history(30))
    assert PREFIX in json.dumps(body.get("system")) + json.dumps(body["messages"][0])
