"""chatfold.agents.CompactingSession with the OpenAI Agents SDK's Runner, a
Chat Completions model and a fake OpenAI-compatible server on loopback:
every request the model receives is checked (no tool output without its
call, the question there), and the stored items stay within the budget."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

import chatfold
from chatfold.agents import CompactingSession, ModelSummarizer

set_tracing_disabled(True)  # nothing leaves this machine

FIRST_ORDER = "ORD-7731-QX"
BUDGET = 1500


class FakeChat:
    """Chat Completions on loopback: parallel calls of ``lookup`` for a new
    user message, an answer after the results; ``summary`` answers a
    summarizer's request (its system prompt mentions a running summary).
    Streams when asked. Records every request body."""

    def __init__(self, calls: int = 2) -> None:
        self.calls = calls
        self.requests: List[Dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append(body)
                message = fake.answer(body["messages"])
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for chunk in fake.chunks(message):
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                out = json.dumps(
                    {
                        "id": f"chatcmpl-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, messages: List[Dict[str, Any]]) -> Dict[str, Any]:
        if "running summary" in str(messages[0].get("content")):
            return {"role": "assistant", "content": "The user asked about orders; they were looked up."}
        last = messages[-1]
        if last["role"] == "user":
            n = len(self.requests)
            calls = [
                {"id": f"call_{n}_{k}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"order": f"ORD-{n}-{k}"})}}
                for k in range(self.calls)
            ]
            return {"role": "assistant", "content": None, "tool_calls": calls}
        return {"role": "assistant", "content": "All orders are on their way. " + "detail " * 30}

    @staticmethod
    def chunks(message: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
        if message.get("tool_calls"):
            for i, call in enumerate(message["tool_calls"]):
                delta = {"tool_calls": [{"index": i, **call}]}
                yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            finish = "tool_calls"
        else:
            for word in message["content"].split(" "):
                yield {**base, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]}
            finish = "stop"
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}

    def model_requests(self) -> List[List[Dict[str, Any]]]:
        return [r["messages"] for r in self.requests if "running summary" not in str(r["messages"][0].get("content"))]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeChat]:
    server = FakeChat()
    yield server
    server.close()


@function_tool
def lookup(order: str) -> str:
    """Looks an order up by its number."""
    return f"Order {order}: shipped from the Rotterdam warehouse. " + "Tracking history line. " * 10


def agent_for(fake: FakeChat) -> Agent:
    client = AsyncOpenAI(base_url=fake.url, api_key="sk-test")
    model = OpenAIChatCompletionsModel(model="fake", openai_client=client)
    return Agent(name="support", instructions="You help with orders.", model=model, tools=[lookup])


def question(i: int) -> str:
    first = f"My order {FIRST_ORDER} never came. " if i == 0 else ""
    return first + f"Question {i}: where are my orders? " + "Please check carefully. " * 6


def check(fake: FakeChat) -> None:
    for messages in fake.model_requests():
        issued = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert answered <= issued, "a tool output without its call"
        assert issued <= answered, "a call without its output"
        assert any(m["role"] == "user" and "Question" in str(m["content"]) for m in messages)
        assert sum(1 for m in messages if str(m.get("content") or "").startswith("Summary of earlier")) <= 1


def stored_tokens(session: CompactingSession) -> int:
    return session.compactor.count(asyncio.run(session.get_items()))


@pytest.mark.parametrize("summarize", ["extractive", "model"])
def test_a_runner_session_stays_within_the_budget(fake: FakeChat, summarize: str, tmp_path: Any) -> None:
    agent = agent_for(fake)
    summarizer = None if summarize == "extractive" else agent.model
    session = CompactingSession(SQLiteSession("s1", str(tmp_path / "s.db")), budget=BUDGET, summarize=summarizer)

    async def run() -> None:
        for i in range(12):
            await Runner.run(agent, question(i), session=session)
            assert session.compactor.count(await session.get_items()) <= BUDGET

    asyncio.run(run())
    check(fake)
    assert session.last_compaction is not None and session.last_error is None
    items = asyncio.run(session.get_items())
    summary = items[0]
    assert summary["role"] == "system" and FIRST_ORDER in summary["content"]
    if summarize == "model":
        assert "The user asked about orders" in summary["content"]


def test_a_redis_session_is_compacted_in_place(fake: FakeChat, redis_url: str) -> None:
    from agents.extensions.memory import RedisSession

    agent = agent_for(fake)

    async def run() -> List[Any]:
        inner = RedisSession.from_url("r1", url=redis_url)
        session = CompactingSession(inner, budget=BUDGET)
        for i in range(10):
            await Runner.run(agent, question(i), session=session)
        assert session.last_compaction is not None
        # What a fresh handle on the same key reads: the compacted items.
        items = await RedisSession.from_url("r1", url=redis_url).get_items()
        assert session.compactor.count(items) <= BUDGET
        return items

    items = asyncio.run(run())
    assert items[0]["role"] == "system" and FIRST_ORDER in items[0]["content"]
    check(fake)


def test_a_streamed_run_is_compacted_after_it_ends(fake: FakeChat, tmp_path: Any) -> None:
    agent = agent_for(fake)
    session = CompactingSession(SQLiteSession("s2", str(tmp_path / "s.db")), budget=BUDGET)

    async def run() -> None:
        for i in range(10):
            before = len(fake.requests)
            result = Runner.run_streamed(agent, question(i), session=session)
            async for _ in result.stream_events():
                pass
            assert result.final_output.startswith("All orders")
            # The run's own requests saw no compaction happen between them.
            assert len(fake.requests) - before == 2
            assert session.compactor.count(await session.get_items()) <= BUDGET

    asyncio.run(run())
    check(fake)
    assert session.last_compaction is not None


def test_a_failing_summarizer_leaves_the_items_and_the_next_turn_retries(fake: FakeChat, tmp_path: Any) -> None:
    agent = agent_for(fake)
    failures = {"left": 1}

    async def flaky(request: Any) -> str:
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("summarizer down")
        return "Orders were looked up."

    session = CompactingSession(SQLiteSession("s3", str(tmp_path / "s.db")), budget=BUDGET, summarize=flaky)

    async def run() -> None:
        for i in range(12):
            await Runner.run(agent, question(i), session=session)

    asyncio.run(run())
    assert failures["left"] == 0 and session.last_compaction is not None
    assert stored_tokens(session) <= BUDGET

    async def explicit() -> None:
        session.summarize = lambda request: ""
        # A fold went down to half the budget: turns until it is passed again
        # (each turn's own compaction fails and leaves the items).
        for i in range(40):
            await Runner.run(agent, question(20 + i), session=session)
            if session.compactor.count(await session.get_items()) > BUDGET:
                break
        before = await session.get_items()
        with pytest.raises(chatfold.SummarizerError):
            await session.compact()
        assert await session.get_items() == before

    asyncio.run(explicit())


def test_the_session_passes_reads_and_writes_through(tmp_path: Any) -> None:
    inner = SQLiteSession("s4", str(tmp_path / "s.db"))
    session = CompactingSession(inner, budget=BUDGET)

    async def run() -> None:
        await session.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        assert await session.get_items() == await inner.get_items()
        assert (await session.pop_item())["content"] == "hello"
        assert len(await session.get_items(limit=5)) == 1
        await session.clear_session()
        assert await inner.get_items() == []

    asyncio.run(run())
    assert session.session_id == "s4"
    with pytest.raises(TypeError):
        ModelSummarizer(agent_for_none())(None)


def agent_for_none() -> Any:
    return OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x"))


def test_the_sdks_compaction_session_takes_openai_models_only() -> None:
    """The control: the SDK's own compaction session refuses any other model."""
    from agents.memory import OpenAIResponsesCompactionSession

    with pytest.raises(ValueError, match="Unsupported model"):
        OpenAIResponsesCompactionSession("x", SQLiteSession("x"), model="claude-sonnet-4")
