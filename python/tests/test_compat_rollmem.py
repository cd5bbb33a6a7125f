"""chatfold.compat.rollmem against rollmem 0.6.0 itself: the same public
names and signatures, the same states after the same adds, and saved state
that loads in either."""

import asyncio
import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rollmem
import chatfold.compat.rollmem as compat
from histories import without_strict

rollmem_memory = pytest.importorskip("rollmem.memory")


def test_the_same_public_names_and_signatures():
    assert sorted(compat.__all__) == sorted(rollmem.__all__)
    assert compat.__version__ == rollmem.__version__
    for name in rollmem.__all__:
        ours, theirs = getattr(compat, name), getattr(rollmem, name)
        if inspect.isclass(theirs):
            for attr, value in vars(theirs).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if callable(value) or isinstance(value, classmethod):
                    mine = inspect.getattr_static(ours, attr)
                    fn = lambda v: v.__func__ if isinstance(v, classmethod) else v
                    assert without_strict(inspect.signature(fn(mine))) == inspect.signature(fn(value)), f"{name}.{attr}"
                    assert inspect.iscoroutinefunction(fn(mine)) == inspect.iscoroutinefunction(fn(value)), f"{name}.{attr}"
        elif isinstance(theirs, str):
            assert ours == theirs
    for module in ["memory", "message"]:
        assert __import__(f"chatfold.compat.rollmem.{module}")


def summarize(summary, messages):
    """A deterministic summarizer that reads every field it is given."""
    parts = [f"{m.role}:{m.content[:8]}" + ("+" + ",".join(t.name for t in m.tool_calls) if m.tool_calls else "") for m in messages]
    # Stripped: chatfold strips the summarizer's text (see the module's docs).
    return ((summary + " | " if summary else "") + ";".join(parts)).strip()


async def async_summarize(summary, messages):
    await asyncio.sleep(0)
    return summarize(summary, messages)


# One step of a conversation: (kind, text)
step = st.tuples(st.sampled_from(["user", "assistant", "system", "tools", "orphan", "meta"]), st.text("abc def ghi", min_size=1, max_size=40))


def apply(memory, module, i, kind, text):
    if kind == "tools":
        call = module.ToolCall(f"c{i}", "search", '{"q": %d}' % i)
        memory.add_message(module.ASSISTANT, "", tool_calls=[call])
        memory.add_tool_message(text, tool_call_id=f"c{i}")
    elif kind == "orphan":
        memory.add_tool_message(text, tool_call_id=f"gone{i}")
    elif kind == "meta":
        memory.add_message(module.USER, text, id=f"m{i}", metadata={"n": i, "tags": ["a"]})
    else:
        getattr(memory, f"add_{kind}_message")(text)


@settings(max_examples=40, deadline=None)
@given(st.lists(step, min_size=1, max_size=40), st.integers(5, 60), st.booleans())
def test_rolling_memory_matches_rollmem(steps, max_tokens, summarizes):
    fn = summarize if summarizes else None
    theirs, ours = rollmem.RollingMemory(max_tokens, fn), compat.RollingMemory(max_tokens, fn)
    for i, (kind, text) in enumerate(steps):
        apply(theirs, rollmem, i, kind, text)
        apply(ours, compat, i, kind, text)
        assert ours.to_dict() == theirs.to_dict()
    assert ours.get_context() == theirs.get_context()
    assert [m.to_dict() for m in ours.get_messages()] == [m.to_dict() for m in theirs.get_messages()]
    assert ours.summary == theirs.summary
    assert ours.buffer == [compat.Message.from_dict(m.to_dict()) for m in theirs.buffer]


@settings(max_examples=25, deadline=None)
@given(st.lists(step, min_size=1, max_size=30), st.integers(1, 8))
def test_window_buffer_and_summary_memories_match_rollmem(steps, n):
    pairs = [
        (rollmem.WindowMemory(n), compat.WindowMemory(n)),
        (rollmem.BufferMemory(), compat.BufferMemory()),
        (rollmem.SummaryMemory(summarize), compat.SummaryMemory(summarize)),
    ]
    for theirs, ours in pairs:
        for i, (kind, text) in enumerate(steps):
            apply(theirs, rollmem, i, kind, text)
            apply(ours, compat, i, kind, text)
        assert ours.to_dict() == theirs.to_dict(), type(ours).__name__


def test_a_custom_token_counter_is_used_as_rollmem_uses_it():
    chars = len
    theirs, ours = rollmem.RollingMemory(50, summarize, chars), compat.RollingMemory(50, summarize, chars)
    for i in range(30):
        for m in (theirs, ours):
            m.add_user_message(f"message {i}")
    assert ours.to_dict() == theirs.to_dict()


def test_async_memories_match_rollmem_when_used_in_sequence():
    async def main():
        for make in [
            lambda m: m.AsyncRollingMemory(20, async_summarize),
            lambda m: m.AsyncRollingMemory(20, summarize),
            lambda m: m.AsyncSummaryMemory(async_summarize),
        ]:
            theirs, ours = make(rollmem), make(compat)
            for i in range(25):
                await theirs.add_user_message(f"user turn {i} here")
                await ours.add_user_message(f"user turn {i} here")
                await theirs.add_assistant_message(f"reply {i}")
                await ours.add_assistant_message(f"reply {i}")
                assert ours.to_dict() == theirs.to_dict()

    asyncio.run(main())


def test_state_saved_by_rollmem_loads_here_and_back():
    theirs = rollmem.RollingMemory(30, summarize)
    for i in range(20):
        apply(theirs, rollmem, i, ["user", "tools", "assistant", "meta"][i % 4], f"text {i}")
    saved = json.loads(json.dumps(theirs.to_dict()))
    ours = compat.RollingMemory.from_dict(saved, max_tokens=30, summarize_fn=summarize)
    assert ours.to_dict() == saved
    for other in [compat.BufferMemory.from_dict(saved), compat.WindowMemory.from_dict(saved, max_messages=5), compat.SummaryMemory.from_dict(saved, summarize_fn=summarize)]:
        assert other.to_dict() == saved
    ours.add_user_message("one more")
    back = rollmem.RollingMemory.from_dict(json.loads(json.dumps(ours.to_dict())), max_tokens=30, summarize_fn=summarize)
    theirs.add_user_message("one more")
    assert back.to_dict() == theirs.to_dict()
    # The native memories read it too.
    import chatfold

    assert chatfold.BufferMemory.from_dict(saved).summary == saved["summary"]


def test_the_same_errors_for_bad_arguments():
    for module in (rollmem, compat):
        with pytest.raises(ValueError):
            module.RollingMemory(0)
        with pytest.raises(TypeError):
            module.RollingMemory(10, async_summarize)
        with pytest.raises(ValueError):
            module.SummaryMemory(None)
        with pytest.raises(ValueError):
            module.BufferMemory.from_dict({"version": 7, "summary": "", "buffer": []})


def test_a_failing_summarizer_keeps_the_turn_as_rollmem_does():
    def down(summary, messages):
        raise ConnectionError("down")

    for module in (rollmem, compat):
        memory = module.RollingMemory(5, down)
        memory.add_user_message("one two three")
        with pytest.raises(ConnectionError):
            memory.add_user_message("four five six")
        assert [m.content for m in memory.buffer] == ["one two three", "four five six"]
        assert memory.summary == ""


def test_an_async_callable_given_to_a_sync_memory_is_refused_as_rollmem_does():
    """Its call returns a coroutine: a TypeError that names the async class,
    no coroutine left unawaited, nothing changed."""
    import warnings

    class AsyncCallable:
        async def __call__(self, existing, evicted):
            return existing

    for module in (rollmem, compat):
        rolling = module.RollingMemory(4, summarize_fn=AsyncCallable(), token_counter=len)
        rolling.add_user_message("aaaa")
        summary = module.SummaryMemory(summarize_fn=AsyncCallable())
        for memory, add, twin, kept in (
            (rolling, "bbbb", "AsyncRollingMemory", ["aaaa", "bbbb"]),
            (summary, "aaaa", "AsyncSummaryMemory", ["aaaa"]),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                with pytest.raises(TypeError, match=twin):
                    memory.add_user_message(add)
            assert memory.summary == ""
            assert [m.content for m in memory.buffer] == kept


def test_an_empty_summary_is_stored_as_rollmem_does_and_refused_when_strict():
    """rollmem stores an empty summary and drops the folded turns, and so
    does the compat module; with strict=True chatfold raises and keeps them."""
    import chatfold

    for module in (rollmem, compat):
        memory = module.RollingMemory(5, lambda s, m: "")
        memory.add_user_message("one two three")
        memory.add_user_message("four five six")
        assert (memory.summary, [m.content for m in memory.buffer]) == ("", ["four five six"]), module
    strict = compat.RollingMemory(5, lambda s, m: "", strict=True)
    strict.add_user_message("one two three")
    with pytest.raises(chatfold.SummarizerError):
        strict.add_user_message("four five six")
    assert [m.content for m in strict.buffer] == ["one two three", "four five six"]
    lenient, strict = compat.SummaryMemory(lambda s, m: ""), compat.SummaryMemory(lambda s, m: "", strict=True)
    lenient.add_user_message("hello")
    assert (lenient.summary, lenient.buffer) == ("", [])
    with pytest.raises(chatfold.SummarizerError):
        strict.add_user_message("hello")
    assert [m.content for m in strict.buffer] == ["hello"]


def test_summary_and_buffer_can_be_assigned():
    memory = compat.RollingMemory(100)
    memory.summary = "earlier"
    memory.buffer = [compat.Message(compat.USER, "hi")]
    assert memory.get_context() == "system: earlier\nuser: hi"


def test_messages_read_from_plain_dicts_are_the_dataclasses_rollmem_makes():
    import dataclasses

    for data in [{"role": "user", "content": "hi"}, {"content": "x", "role": "tool"}]:
        ours = compat.Message.from_dict(data)
        assert ours == compat.Message(data["role"], data["content"])
        assert hash(ours) == hash(compat.Message(data["role"], data["content"]))
        assert ours.to_dict() == rollmem.Message.from_dict(data).to_dict()
        assert ours.metadata == {} and ours.tool_calls == ()
        with pytest.raises(dataclasses.FrozenInstanceError):
            ours.role = "assistant"  # type: ignore[misc]
    # Any other shape takes the checked path.
    with pytest.raises(KeyError):
        compat.Message.from_dict({"role": "user", "id": "1"})
