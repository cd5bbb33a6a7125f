"""chatfold.langchain.SummarizationMiddleware in real LangChain agents
(``create_agent``) with scripted models: every request the model receives is
checked, and each defect of LangChain's own middleware is shown in it (the
control) and not in chatfold's."""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware as LangChainSummarization
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver

import chatfold
from chatfold.langchain import SUMMARY_PREFIX, ChatModelSummarizer, SummarizationMiddleware
from frameworks import (
    FIRST_TURN_IDS,
    is_question,
    Scripted,
    Summarizer,
    lookup,
    orphans,
    question,
    summaries,
    text_of,
)

SYSTEM = "You are a careful support agent for an online shop. " * 12
TRIGGER = 1500
CONFIG = {"configurable": {"thread_id": "t1"}}


def agent_with(middleware: Any, model: Scripted) -> Any:
    return create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver())


def sent_tokens(messages: List[Any]) -> int:
    """What the model was sent, as LangChain's approximate counter measures
    it with the tools: the system prompt is the first message."""
    return count_tokens_approximately(messages, tools=[lookup])


def converse(agent: Any, turns: int, start: int = 0) -> Any:
    state = None
    for i in range(start, start + turns):
        state = agent.invoke({"messages": [question(i)]}, CONFIG)
    return state


def check_requests(model: Scripted, trigger: int = TRIGGER) -> None:
    assert model.seen
    for messages in model.seen:
        assert isinstance(messages[0], SystemMessage) and messages[0].content == SYSTEM
        assert orphans(messages) == []
        assert sent_tokens(messages) < trigger
        assert summaries(messages, SUMMARY_PREFIX) <= 1
        # The turn in progress: the newest question is there, verbatim.
        assert any(is_question(m) for m in messages)
        # The task (the first question) is there verbatim, right after the summary.
        assert any(m.content == question(0).content for m in messages)
        at = [i for i, m in enumerate(messages) if str(m.content).startswith(SUMMARY_PREFIX)]
        if at:
            assert messages[at[0] + 1].content == question(0).content


@pytest.mark.parametrize("calls,rounds", [(1, 1), (3, 1), (2, 3)])
def test_every_request_is_whole_and_under_the_trigger(calls: int, rounds: int) -> None:
    model, summarizer = Scripted(calls=calls, rounds=rounds), Summarizer()
    middleware = SummarizationMiddleware(summarizer, trigger=("tokens", TRIGGER), keep=("messages", 6))
    state = converse(agent_with(middleware, model), 14)
    check_requests(model)
    assert summarizer.seen, "the history never reached the trigger"
    # One running summary in the state, LangChain's shape, with the ledger
    # holding what the lossy summarizer dropped.
    first = state["messages"][0]
    assert isinstance(first, HumanMessage) and first.additional_kwargs.get("lc_source") == "summarization"
    assert first.content.startswith(SUMMARY_PREFIX)
    assert summaries(state["messages"], SUMMARY_PREFIX) == 1
    # The task that gave them is pinned: verbatim right after the summary.
    assert state["messages"][1].content == question(0).content
    for identifier in FIRST_TURN_IDS:
        assert identifier not in first.content


def test_langchains_own_middleware_goes_over_the_trigger() -> None:
    """The control (langchain #34664): the system prompt and the tools are not counted."""
    model = Scripted(calls=2)
    middleware = LangChainSummarization(Summarizer(), trigger=("tokens", TRIGGER), keep=("messages", 6))
    converse(agent_with(middleware, model), 14)
    assert any(sent_tokens(m) >= TRIGGER for m in model.seen)


def test_an_async_agent_folds_with_the_awaited_summarizer() -> None:
    model, summarizer = Scripted(calls=3), Summarizer()
    agent = agent_with(SummarizationMiddleware(summarizer, trigger=("tokens", TRIGGER), keep=("tokens", 500)), model)

    async def run() -> Any:
        state = None
        for i in range(12):
            state = await agent.ainvoke({"messages": [question(i)]}, CONFIG)
        return state

    state = asyncio.run(run())
    check_requests(model)
    assert summarizer.seen and summaries(state["messages"], SUMMARY_PREFIX) == 1


def long_history(turns: int) -> List[Any]:
    """A history of ``turns`` answered questions with parallel tool calls."""
    messages: List[Any] = []
    for i in range(turns):
        messages.append(question(i))
        calls = [{"name": "lookup", "args": {"order": f"ORD-{i}-{k}"}, "id": f"h{i}_{k}"} for k in range(2)]
        messages.append(AIMessage(content="", tool_calls=calls))
        messages += [ToolMessage(content=lookup.invoke({"order": c["args"]["order"]}), tool_call_id=c["id"]) for c in calls]
        messages.append(AIMessage(content="All found. " + "detail " * 30))
    return messages


def test_the_whole_folded_span_reaches_the_summarizer() -> None:
    """trim_tokens_to_summarize bounds one call; the span is folded in
    chunks, so the first turn's facts reach the summarizer (LangChain's own
    shows it only the span's last 4 000 tokens)."""
    history = long_history(60)
    ours, theirs = Summarizer(), Summarizer()
    for middleware, summarizer in [
        (SummarizationMiddleware(ours, trigger=("tokens", 3000), keep=("messages", 10)), ours),
        (LangChainSummarization(theirs, trigger=("tokens", 3000), keep=("messages", 10)), theirs),
    ]:
        model = Scripted()
        agent_with(middleware, model).invoke({"messages": [*history, question(60)]}, CONFIG)
    # The first turn's calls (its question, the task, stays verbatim: pinned).
    first_calls = ["ORD-0-0", "ORD-0-1"]
    read = text_of(ours.seen)
    assert all(identifier in read for identifier in first_calls)
    assert not any(identifier in read for identifier in FIRST_TURN_IDS)
    assert len(ours.seen) > 1
    for request in ours.seen:
        assert count_tokens_approximately(request) <= 4000 + 1200  # one chunk, with its prompt
    assert not any(identifier in text_of(theirs.seen) for identifier in first_calls)


def test_an_empty_summary_changes_nothing() -> None:
    history = long_history(30)
    model = Scripted()
    agent = agent_with(SummarizationMiddleware(Summarizer(reply="   "), trigger=("tokens", 3000)), model)
    agent.update_state(CONFIG, {"messages": history})
    before = agent.get_state(CONFIG).values["messages"]
    with pytest.raises(chatfold.SummarizerError):
        agent.invoke({"messages": [question(30)]}, CONFIG)
    assert not model.seen
    after = agent.get_state(CONFIG).values["messages"]
    assert [m.id for m in after[: len(before)]] == [m.id for m in before]
    assert not any(isinstance(m.content, str) and m.content.startswith(SUMMARY_PREFIX) for m in after)


def test_langchains_own_middleware_keeps_an_empty_summary() -> None:
    """The control: LangChain's own replaces the folded turns with nothing."""
    agent = agent_with(LangChainSummarization(Summarizer(reply=""), trigger=("tokens", 3000)), Scripted())
    state = agent.invoke({"messages": [*long_history(30), question(30)]}, CONFIG)
    assert state["messages"][0].content.strip() == SUMMARY_PREFIX.strip()


def test_a_failing_summarizer_changes_nothing_or_gives_the_extractive_summary() -> None:
    # A summarizer callable: no retries (a model is retried with back-off first).
    def down(messages: List[Any]) -> str:
        raise RuntimeError("the summary model is down")

    history = long_history(30)
    model = Scripted()
    agent = agent_with(SummarizationMiddleware(Summarizer(), summarizer=down, trigger=("tokens", 3000)), model)
    agent.update_state(CONFIG, {"messages": history})
    before = agent.get_state(CONFIG).values["messages"]
    with pytest.raises(RuntimeError, match="summary model is down"):
        agent.invoke({"messages": [question(30)]}, CONFIG)
    assert not model.seen
    assert [m.id for m in agent.get_state(CONFIG).values["messages"][: len(before)]] == [m.id for m in before]

    fallback = SummarizationMiddleware(
        Summarizer(), summarizer=down, trigger=("tokens", 3000), on_summarizer_error="extractive"
    )
    model = Scripted()
    state = agent_with(fallback, model).invoke({"messages": [*history, question(30)]}, CONFIG)
    summary = state["messages"][0]
    assert summary.additional_kwargs["chatfold"]["summary"] == "extractive"
    assert "summary model is down" in summary.additional_kwargs["chatfold"]["error"]
    assert "ORD-0-0" in summary.content
    assert state["messages"][1].content == question(0).content  # the task, pinned
    check_requests(model, 3000)


def test_a_long_tool_only_turn_is_summarized_by_the_summarizer() -> None:
    """langchain #39261: in a turn of many tool calls LangChain's own puts a
    placeholder where the summary should be; chatfold's calls the summarizer."""
    placeholder = "Previous conversation was too long to summarize."
    results = {}
    for name, make in [("ours", SummarizationMiddleware), ("theirs", LangChainSummarization)]:
        model, summarizer = Scripted(calls=2, rounds=40), Summarizer()
        middleware = make(summarizer, trigger=("tokens", 6000), keep=("messages", 6))
        agent_with(middleware, model).invoke({"messages": [question(0)]}, CONFIG)
        results[name] = (model, summarizer)
    model, summarizer = results["ours"]
    check_requests(model, 6000)
    assert summarizer.seen
    assert not any(placeholder in str(m.content) for ms in model.seen for m in ms)
    model, _ = results["theirs"]
    assert any(placeholder in str(m.content) for ms in model.seen for m in ms)


def test_an_orphaned_result_in_the_history_is_not_sent() -> None:
    """langchain #38352: a stale tool result whose call is gone reaches the
    provider through LangChain's own middleware, not through chatfold's."""
    history = long_history(12)
    stale = ToolMessage(content="stale result", tool_call_id="call_gone")
    history.insert(len(history) - 4, stale)
    for make, expect in [(SummarizationMiddleware, False), (LangChainSummarization, True)]:
        model = Scripted()
        agent_with(make(Summarizer(), trigger=("tokens", 2500), keep=("messages", 8)), model).invoke(
            {"messages": [*history, question(12)]}, CONFIG
        )
        assert any(orphans(m) for m in model.seen) is expect


def test_the_running_summary_is_extended_not_summarized_as_a_turn() -> None:
    model, summarizer = Scripted(), Summarizer()
    converse(agent_with(SummarizationMiddleware(summarizer, trigger=("tokens", TRIGGER)), model), 16)
    assert len(summarizer.seen) >= 2
    later = summarizer.seen[-1]
    # chatfold's prompt: the previous summary in its own slot, the ledger noted.
    assert "<previous_summary>" in later[-1].content
    assert "The user asked about several orders" in later[-1].content.split("</previous_summary>")[0]


def test_a_summarizer_callable_receives_langchain_messages() -> None:
    received: List[Any] = []

    def summarize(messages: List[Any]) -> str:
        received.append(messages)
        return "Orders were looked up."

    model = Scripted()
    middleware = SummarizationMiddleware(Summarizer(), summarizer=summarize, trigger=("tokens", 3000))
    agent_with(middleware, model).invoke({"messages": [*long_history(30), question(30)]}, CONFIG)
    assert received and all(isinstance(m, (HumanMessage, AIMessage, ToolMessage)) for m in received[0])
    check_requests(model, 3000)


def test_a_custom_summary_prompt_is_formatted_as_langchain_does() -> None:
    summarizer = Summarizer()
    prompt = "Summarize this for a support agent:\n{messages}"
    agent = agent_with(SummarizationMiddleware(summarizer, trigger=("tokens", 3000), summary_prompt=prompt), Scripted())
    agent.invoke({"messages": [*long_history(30), question(30)]}, CONFIG)
    (sent,) = summarizer.seen[:1]
    assert len(sent) == 1 and sent[0].content.startswith("Summarize this for a support agent:\n")


def test_the_parameters_are_checked_as_langchain_checks_them() -> None:
    with pytest.raises(ValueError):
        SummarizationMiddleware(Summarizer(), trigger=("tokens", 0))
    with pytest.raises(ValueError):
        SummarizationMiddleware(Summarizer(), keep=("fraction", 0.5))  # no profile
    with pytest.warns(DeprecationWarning):
        middleware = SummarizationMiddleware(Summarizer(), max_tokens_before_summary=900)
    assert middleware.trigger == ("tokens", 900)
    with pytest.raises(chatfold.InvalidConfig):
        SummarizationMiddleware(Summarizer(), trigger=("tokens", 900), on_summarizer_error="ignore")


def test_a_message_count_trigger_keeps_the_count_under_it() -> None:
    model = Scripted(calls=1)
    middleware = SummarizationMiddleware(Summarizer(), trigger=("messages", 12), keep=("messages", 4))
    converse(agent_with(middleware, model), 10)
    assert all(len(m) - 1 < 12 for m in model.seen)  # less the system prompt
    assert all(orphans(m) == [] for m in model.seen)


def test_a_chat_model_summarizes_for_any_chatfold_api() -> None:
    summarizer = Summarizer(reply="Ann ordered a lamp.")
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40} for i in range(40)]
    compactor = chatfold.Compactor(600, tokenizer="heuristic")
    result = compactor.compact(history, ChatModelSummarizer(summarizer))
    assert result.summarized and "Ann ordered a lamp." in result.messages[0]["content"]
    system, user = summarizer.seen[0][0].content, summarizer.seen[0][1].content
    assert "running summary" in system and "turn 0" in user
    result = asyncio.run(compactor.compact_async(history, ChatModelSummarizer(summarizer)))
    assert result.summarized and len(summarizer.seen) == 2


def test_a_message_count_in_a_list_of_triggers_folds_beside_a_token_trigger() -> None:
    model = Scripted(calls=1)
    middleware = SummarizationMiddleware(Summarizer(), trigger=[("tokens", 500000), ("messages", 20)], keep=("messages", 6))
    converse(agent_with(middleware, model), 10)
    assert all(len(m) - 1 < 20 for m in model.seen)
    assert all(orphans(m) == [] for m in model.seen)


def test_provider_blocks_and_invalid_calls_are_read_and_kept_whole() -> None:
    history: List[Any] = []
    for i in range(14):
        history.append(question(i))
        thinking = {"type": "thinking", "thinking": "Let me look. " * 20, "signature": "sig"}
        history.append(AIMessage(content=[thinking, {"type": "text", "text": "Calling."}], tool_calls=[{"name": "lookup", "args": {"order": f"O-{i}"}, "id": f"t{i}"}]))
        history.append(ToolMessage(content=[{"type": "text", "text": "shipped " * 40}], tool_call_id=f"t{i}"))
        history.append(AIMessage(content="", invalid_tool_calls=[{"name": "lookup", "args": "{oops", "id": f"bad{i}", "error": "bad json", "type": "invalid_tool_call"}]))
        history.append(ToolMessage(content="Error: bad arguments " + "x" * 200, tool_call_id=f"bad{i}"))
        history.append(AIMessage(content="Done. " + "detail " * 30))
    model = Scripted()
    agent_with(SummarizationMiddleware(Summarizer(), trigger=("tokens", 3000)), model).invoke({"messages": [*history, question(14)]}, CONFIG)
    assert model.seen
    for request in model.seen:
        ids = {c["id"] for m in request if isinstance(m, AIMessage) for c in [*m.tool_calls, *m.invalid_tool_calls]}
        assert all(m.tool_call_id in ids for m in request if isinstance(m, ToolMessage))
