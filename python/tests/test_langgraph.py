"""chatfold.langgraph.SummarizationNode as the pre-model hook of LangGraph's
``create_react_agent`` and as a node of a custom graph, with scripted models:
every request the model receives is checked; langmem's own node is the
control for each defect it is known for."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any, Dict, List

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.prebuilt.chat_agent_executor import AgentState

import chatfold
from chatfold.langgraph import SUMMARY_PREFIX, RunningSummary, SummarizationNode
from frameworks import FIRST_TURN_IDS, Scripted, Summarizer, is_question, lookup, orphans, question, summaries

MAX_TOKENS = 1200
CONFIG = {"configurable": {"thread_id": "g1"}}


class State(AgentState):
    context: Dict[str, Any]


def react_agent(hook: Any, model: Scripted) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for langchain's create_agent
        return create_react_agent(model, [lookup], pre_model_hook=hook, state_schema=State, checkpointer=InMemorySaver())


def converse(agent: Any, turns: int) -> Any:
    state = None
    for i in range(turns):
        state = agent.invoke({"messages": [question(i)]}, CONFIG)
    return state


def node(summarizer: Any, **kwargs: Any) -> SummarizationNode:
    return SummarizationNode(
        model=summarizer,
        max_tokens=MAX_TOKENS,
        max_summary_tokens=400,
        output_messages_key="llm_input_messages",
        **kwargs,
    )


@pytest.mark.parametrize("calls,rounds", [(1, 1), (3, 2)])
def test_every_request_is_whole_and_within_max_tokens(calls: int, rounds: int) -> None:
    model, summarizer = Scripted(calls=calls, rounds=rounds), Summarizer()
    state = converse(react_agent(node(summarizer), model), 12)
    assert summarizer.seen
    for messages in model.seen:
        assert orphans(messages) == []
        assert count_tokens_approximately(messages) <= MAX_TOKENS
        assert summaries(messages, SUMMARY_PREFIX) <= 1
        assert is_question(messages[-1]) or any(is_question(m) for m in messages)
        # The task stays verbatim, right after the summary once there is one.
        at = [i for i, m in enumerate(messages) if str(m.content).startswith(SUMMARY_PREFIX)]
        assert messages[at[0] + 1 if at else 0].content == question(0).content
    running = state["context"]["running_summary"]
    assert isinstance(running, RunningSummary)
    # The full history stays in the state; the running summary says what it folded.
    assert running.last_summarized_message_id in running.summarized_message_ids
    assert all(m.id in {x.id for x in state["messages"]} for m in state["messages"][:1])
    assert "ORD-1-0" in running.summary  # the first turn's calls
    for identifier in FIRST_TURN_IDS:
        assert identifier not in running.summary  # the task is not folded


def test_langmems_node_orphans_parallel_results_and_drops_the_question() -> None:
    """The control (langmem #126, #111)."""
    langmem = pytest.importorskip("langmem.short_term")
    model = Scripted(calls=3, rounds=2)
    hook = langmem.SummarizationNode(
        model=Summarizer(), max_tokens=MAX_TOKENS, max_summary_tokens=200, output_messages_key="llm_input_messages"
    )
    converse(react_agent(hook, model), 12)
    assert any(orphans(m) for m in model.seen) or any(not any(is_question(x) for x in m) for m in model.seen)


def test_a_custom_graph_overwrites_its_messages_with_one_summary() -> None:
    class Graph(MessagesState):
        context: Dict[str, Any]

    model, summarizer = Scripted(calls=2), Summarizer()
    summarize = SummarizationNode(
        model=summarizer, max_tokens=MAX_TOKENS, max_summary_tokens=200, output_messages_key="messages"
    )

    def call_model(state: Graph) -> Dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(Graph)
    builder.add_node("summarize", summarize)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "call_model")
    graph = builder.compile(checkpointer=InMemorySaver())
    for i in range(14):
        state = graph.invoke({"messages": [question(i)]}, CONFIG)
    assert summarizer.seen
    assert summaries(state["messages"], SUMMARY_PREFIX) == 1
    assert count_tokens_approximately(state["messages"][:-1]) <= MAX_TOKENS
    assert all(count_tokens_approximately(m) <= MAX_TOKENS for m in model.seen)


def test_the_async_graph_awaits_the_summarizer() -> None:
    model, summarizer = Scripted(calls=2), Summarizer()
    agent = react_agent(node(summarizer), model)

    async def run() -> Any:
        for i in range(12):
            state = await agent.ainvoke({"messages": [question(i)]}, CONFIG)
        return state

    state = asyncio.run(run())
    assert summarizer.seen and "running_summary" in state["context"]
    assert all(orphans(m) == [] and count_tokens_approximately(m) <= MAX_TOKENS for m in model.seen)


def test_a_failing_model_changes_nothing_unless_the_extractive_summary_is_asked_for() -> None:
    history: List[Any] = []
    for i in range(30):
        history += [question(i), AIMessage(content="Answer " + "detail " * 40)]
    hook = node(Summarizer(fail=True))
    with pytest.raises(RuntimeError, match="down"):
        hook.invoke({"messages": history, "context": {}})
    with pytest.raises(chatfold.SummarizerError):
        node(Summarizer(reply="")).invoke({"messages": history, "context": {}})
    out = node(Summarizer(fail=True), on_summarizer_error="extractive").invoke({"messages": history, "context": {}})
    summary = out["llm_input_messages"][0]
    assert isinstance(summary, SystemMessage) and summary.content.startswith(SUMMARY_PREFIX)
    assert summary.additional_kwargs["chatfold"]["summary"] == "extractive"
    assert count_tokens_approximately(out["llm_input_messages"]) <= MAX_TOKENS


def test_langmem_prompts_and_running_summaries_are_read() -> None:
    langmem = pytest.importorskip("langmem.short_term")
    from langmem.short_term.summarization import DEFAULT_EXISTING_SUMMARY_PROMPT, DEFAULT_INITIAL_SUMMARY_PROMPT

    history: List[Any] = [SystemMessage(content="Be brief.")]
    for i in range(30):
        history += [HumanMessage(content=f"q{i} " * 30, id=f"h{i}"), AIMessage(content=f"a{i} " * 30, id=f"a{i}")]
    summarizer = Summarizer(reply="Thirty questions were answered.")
    hook = node(
        summarizer,
        initial_summary_prompt=DEFAULT_INITIAL_SUMMARY_PROMPT,
        existing_summary_prompt=DEFAULT_EXISTING_SUMMARY_PROMPT,
    )
    previous = langmem.RunningSummary(
        summary="Earlier: the user is Ann.", summarized_message_ids={"h0", "a0"}, last_summarized_message_id="a0"
    )
    out = hook.invoke({"messages": history, "context": {"running_summary": previous}})
    sent = summarizer.seen[0]
    assert "This is summary of the conversation so far: Earlier: the user is Ann." in sent[-1].content
    assert not any(m.content == "q0 " * 30 for m in sent)  # already summarized
    messages = out["llm_input_messages"]
    assert messages[0].content == "Be brief." and messages[1].content.startswith(SUMMARY_PREFIX)
    running = out["context"]["running_summary"]
    # h1 opens what is not yet summarized: pinned as the task, after the summary.
    assert {"h0", "a0", "a1"} <= running.summarized_message_ids and "h1" not in running.summarized_message_ids
    assert messages[2].id == "h1"
