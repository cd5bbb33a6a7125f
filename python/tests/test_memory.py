"""The memories through Python: no loss with failing and slow summarizers,
concurrent tasks on one memory, state in the Rust crate's JSON."""

import asyncio

import pytest

import chatfold
from chatfold import (
    AsyncRollingMemory,
    AsyncSummaryMemory,
    BufferMemory,
    RollingMemory,
    SummaryMemory,
    TieredMemory,
    WindowMemory,
)


def gist(request):
    return f"{len(request)} more turns" + (f" after [{request.previous_summary}]" if request.previous_summary else "")


class Flaky:
    """Fails every other call."""

    def __init__(self):
        self.calls = 0

    def __call__(self, request):
        self.calls += 1
        if self.calls % 2:
            raise ConnectionError("summarizer down")
        return gist(request)


def contents(memory):
    return [m["content"] for m in memory.buffer]


def test_rolling_memory_folds_and_keeps_the_latest():
    memory = RollingMemory(60, gist, tokenizer="heuristic")
    for i in range(30):
        memory.add_user(f"message number {i} about the trip")
    assert memory.summary
    assert contents(memory)[-1] == "message number 29 about the trip"
    assert memory.buffer_tokens <= 60
    assert memory.messages()[0]["role"] == "system"
    assert memory.context().splitlines()[-1] == "user: message number 29 about the trip"


def test_a_failing_summarizer_loses_nothing():
    memory = RollingMemory(40, Flaky(), tokenizer="heuristic")
    added = []
    for i in range(25):
        text = f"turn {i} with a few words"
        before = memory.to_dict()
        try:
            memory.add_user(text)
        except ConnectionError:
            after = memory.to_dict()
            assert after["summary"] == before["summary"]
            assert after["buffer"][:-1] == before["buffer"]
            assert after["buffer"][-1]["content"] == text
        added.append(text)
    # Everything added is either in the buffer or was folded by a successful call.
    assert contents(memory)[-1] == added[-1]


def test_state_moves_between_memories():
    rolling = RollingMemory(50, gist, tokenizer="heuristic")
    for i in range(20):
        rolling.add_user(f"turn {i} of the conversation")
    state = rolling.to_dict()
    assert state["version"] == 2
    for other in [
        BufferMemory.from_dict(state),
        WindowMemory.from_dict(state, 100),
        SummaryMemory.from_dict(state, gist),
        RollingMemory.from_dict(state, 50, gist, tokenizer="heuristic"),
    ]:
        assert other.to_dict() == state
    with pytest.raises(chatfold.InvalidState):
        BufferMemory.from_dict({"version": 99, "summary": "", "buffer": []})


def test_window_and_buffer_memories():
    window = WindowMemory(4)
    buffer = BufferMemory()
    for i in range(10):
        window.add_user(f"u{i}")
        window.add_assistant(f"a{i}")
        buffer.add_user(f"u{i}")
    assert contents(window) == ["u8", "a8", "u9", "a9"]
    assert len(buffer.buffer) == 10
    window.clear()
    assert window.buffer == [] and window.summary == ""


def test_tool_calls_leave_with_their_results():
    window = WindowMemory(3)
    window.add_user("search please")
    window.add_message({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "s", "arguments": "{}"}}]})
    window.add_tool("found", "c1")
    window.add_assistant("here it is")
    window.add_user("thanks")
    roles = [m["role"] for m in window.buffer]
    assert "tool" not in roles or "assistant" in roles
    assert roles[0] == "user" or roles == ["assistant", "tool", "assistant"]


def test_summary_memory_folds_every_turn():
    memory = SummaryMemory(gist)
    memory.add_user("hello")
    memory.add_assistant("hi")
    assert memory.buffer == []
    assert memory.summary.startswith("1 more turns after")


def run(coro):
    return asyncio.run(coro)


def test_async_rolling_memory_with_a_slow_async_summarizer_and_concurrent_tasks():
    calls = []

    async def slow(request):
        calls.append(len(request))
        await asyncio.sleep(0.001)
        return gist(request)

    memory = AsyncRollingMemory(40, slow, tokenizer="heuristic")

    async def main():
        await asyncio.gather(*[memory.add_user(f"task {i} says hello there") for i in range(40)])
        await memory.add_user("the last one")

    run(main())
    assert calls
    assert contents(memory)[-1] == "the last one"
    # Nothing lost: every turn is in the buffer or counted in a summary.
    folded = sum(calls)
    assert folded + len(memory.buffer) >= 41


def test_async_failures_and_cancellation_change_nothing():
    async def main():
        started = asyncio.Event()

        async def hang(request):
            started.set()
            await asyncio.sleep(3600)

        memory = AsyncRollingMemory(20, hang, tokenizer="heuristic")
        for i in range(3):
            await memory.add_user(f"short {i}")
        before = memory.to_dict()
        task = asyncio.ensure_future(memory.add_user("this one pushes the buffer over its budget"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after = memory.to_dict()
        assert after["summary"] == before["summary"]
        assert after["buffer"][:-1] == before["buffer"]

        async def fail(request):
            raise ConnectionError("down")

        failing = AsyncRollingMemory.from_dict(after, 20, fail, tokenizer="heuristic")
        with pytest.raises(ConnectionError):
            await failing.add_user("and another")
        assert failing.to_dict()["buffer"][:-1] == after["buffer"]

    run(main())


def test_clear_during_an_async_fold_wins():
    async def main():
        started = asyncio.Event()
        release = asyncio.Event()

        async def held(request):
            started.set()
            await release.wait()
            return "stale summary"

        memory = AsyncSummaryMemory(held)
        task = asyncio.ensure_future(memory.add_user("hello"))
        await started.wait()
        memory.clear()
        release.set()
        await task
        assert memory.summary == "" and memory.buffer == []

    run(main())


def test_tiered_memory_adds_never_wait_and_the_view_stays_under_the_hard_limit():
    async def main():
        release = asyncio.Event()

        async def slow(request):
            await release.wait()
            return f"{len(request)} folded"

        memory = TieredMemory(100, 150, slow, tokenizer="heuristic", system=[{"role": "system", "content": "pinned"}])
        async with memory:
            for i in range(60):
                memory.add_user(f"turn {i} with some words to fill the buffer")
                assert chatfold.count_tokens(memory.messages(), "heuristic") <= 150
            await asyncio.sleep(0)
            assert memory.stats()["buffer_messages"] == 60  # nothing folded yet, nothing lost
            release.set()
            await memory.fold_now()
            stats = memory.stats()
            assert stats["folds_done"] >= 1 and stats["messages_dropped"] == 0
            assert memory.messages()[0] == {"role": "system", "content": "pinned"}
            assert memory.summary
        state = memory.to_dict()
        assert state["system"] == [{"role": "system", "content": "pinned"}]

    run(main())


def test_tiered_memory_records_failures_and_retries():
    async def main():
        calls = {"n": 0}

        async def flaky(request):
            calls["n"] += 1
            if calls["n"] == 1:
                raise ConnectionError("first call fails")
            return "recovered"

        memory = TieredMemory(50, 100, flaky, tokenizer="heuristic")
        async with memory:
            for i in range(30):
                memory.add_user(f"turn {i} with some words in it")
            with pytest.raises(ConnectionError):
                await memory.fold_now()
            stats = memory.stats()
            assert stats["folds_failed"] == 1
            assert "first call fails" in stats["last_error"]
            assert stats["buffer_messages"] == 30  # nothing lost
            await memory.fold_now()  # the retry succeeds
            stats = memory.stats()
            assert stats["folds_done"] >= 1 and stats["consecutive_failures"] == 0
            assert memory.summary.startswith("recovered")

    run(main())


def test_a_counters_exception_reaches_the_caller_of_an_add():
    def count(text):
        raise OverflowError("counter broke")

    async def summarize(request):
        return "s"

    async def main():
        memory = TieredMemory(100, 200, summarize, tokenizer=count)
        with pytest.raises(OverflowError):
            memory.add_user("hello")

    run(main())
    with pytest.raises(OverflowError):
        RollingMemory(100, gist, tokenizer=count).add_user("hello")


def test_threads_share_a_sync_memory_whose_summarizer_is_python():
    """A Python summarizer runs under the memory's lock with the GIL taken
    again; other threads reading or adding meanwhile neither deadlock nor
    lose a turn."""
    import threading

    memory = RollingMemory(40, gist, tokenizer="heuristic")
    errors = []

    def adder(k):
        try:
            for i in range(50):
                memory.add_user(f"thread {k} turn {i} with some words")
                memory.messages()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=adder, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert memory.summary and memory.buffer


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30), st.booleans()), min_size=1, max_size=40), st.integers(10, 80))
def test_no_turn_is_lost_whatever_the_summarizer_does(turns, max_tokens):
    """Every added turn is in the buffer, in order, or was handed to a
    summarizer call that succeeded: failures fold nothing."""
    outcomes = iter([ok for _, ok in turns] * 4)
    folded = []

    def summarize(request):
        if not next(outcomes, True):
            raise RuntimeError("down")
        folded.extend(m["content"] for m in request.messages)
        return f"{len(folded)} turns folded"

    memory = RollingMemory(max_tokens, summarize, tokenizer="heuristic")
    added = []
    for i, (words, _) in enumerate(turns):
        text = f"t{i} " + "w " * words
        added.append(text)
        try:
            memory.add_user(text)
        except RuntimeError:
            pass
        buffer = [m["content"] for m in memory.buffer]
        assert buffer == added[len(added) - len(buffer) :]
        assert folded + buffer == added


@settings(max_examples=30, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(10, 60))
def test_no_turn_is_lost_by_concurrent_async_adds(outcomes, max_tokens):
    """Concurrent tasks adding to one async memory with a slow, flaky
    summarizer: what was folded, then the buffer, is what was added."""
    results = iter(outcomes * 8)
    folded = []

    async def summarize(request):
        await asyncio.sleep(0)
        if not next(results, True):
            raise RuntimeError("down")
        folded.extend(m["content"] for m in request.messages)
        return f"{len(folded)} turns folded"

    memory = AsyncRollingMemory(max_tokens, summarize, tokenizer="heuristic")
    added = [f"task {i} says " + "w " * (i % 7 + 1) for i in range(len(outcomes) * 2)]

    async def add(text):
        try:
            await memory.add_user(text)
        except RuntimeError:
            pass

    async def main():
        await asyncio.gather(*[add(t) for t in added])

    run(main())
    assert folded + [m["content"] for m in memory.buffer] == added
