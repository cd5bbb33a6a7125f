"""sawtooth-memory's ``integrations.langgraph.graph``: a LangGraph graph whose
model sees the context manager's compacted prompt.

As sawtooth's (it needs ``langgraph``): the compression node syncs
``state["messages"]`` into the adapter and writes the compiled prompt to
``state["llm_context"]``; the model node answers from ``llm_context`` and
appends its reply to ``messages``, retrying a rate limit or a server error
(429, 500, 502, 503, 504) up to five attempts with exponential waits.

    [START] -> sawtooth_compression_node -> llm_node -> [END]
"""

from __future__ import annotations

import logging
import operator
from typing import Annotated, Any, Dict, List

from langchain_core.messages import BaseMessage
from langgraph.graph import END, START, StateGraph
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential
from typing_extensions import TypedDict

from .adapter import SawtoothLangGraphAdapter

logger = logging.getLogger(__name__)

__all__ = ["AgentState", "build_sawtooth_graph", "make_compression_node", "make_llm_node"]

# The HTTP statuses worth another attempt.
_TRANSIENT = {429, 500, 502, 503, 504}


class AgentState(TypedDict):
    """The graph's state: ``messages``, the whole log (appended to), and
    ``llm_context``, the compiled prompt (replaced on every turn, never
    synced back)."""

    messages: Annotated[List[BaseMessage], operator.add]
    llm_context: List[BaseMessage]


def _is_transient_error(exc: BaseException) -> bool:
    """Whether a model call's error is worth retrying: its ``status_code``
    is a rate limit or a server error, or, without one, its text names one."""
    status = getattr(exc, "status_code", None)
    if status is not None:
        return status in _TRANSIENT
    text = str(exc).lower()
    return "rate limit" in text or any(str(code) in text for code in _TRANSIENT)


_llm_retry = retry(
    retry=retry_if_exception(_is_transient_error),
    wait=wait_exponential(multiplier=1, min=2, max=60),
    stop=stop_after_attempt(5),
    reraise=True,
)


def make_compression_node(adapter: SawtoothLangGraphAdapter) -> Any:
    """The node that syncs ``state["messages"]`` and returns
    ``{"llm_context": <the compiled prompt>}``; it never waits for a fold."""

    async def sawtooth_compression_node(state: AgentState) -> Dict[str, Any]:
        await adapter.sync_state(state["messages"])
        return {"llm_context": await adapter.get_compiled_prompt()}

    return sawtooth_compression_node


def make_llm_node(llm: Any) -> Any:
    """The node that calls ``llm.ainvoke(state["llm_context"])`` (retrying
    transient errors) and returns ``{"messages": [reply]}``."""

    @_llm_retry
    async def invoke(messages: List[BaseMessage]) -> Any:
        return await llm.ainvoke(messages)

    async def llm_node(state: AgentState) -> Dict[str, Any]:
        context = state["llm_context"]
        if not context:
            logger.warning("llm_node: llm_context is empty; is the compression node before it?")
        return {"messages": [await invoke(context)]}

    return llm_node


def build_sawtooth_graph(llm: Any, adapter: SawtoothLangGraphAdapter) -> Any:
    """The compiled graph: compression, then the model."""
    graph = StateGraph(AgentState)
    graph.add_node("sawtooth_compression_node", make_compression_node(adapter))
    graph.add_node("llm_node", make_llm_node(llm))
    graph.add_edge(START, "sawtooth_compression_node")
    graph.add_edge("sawtooth_compression_node", "llm_node")
    graph.add_edge("llm_node", END)
    return graph.compile()
