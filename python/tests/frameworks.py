"""Scripted LangChain chat models and the checks every request a model
receives must pass, shared by the LangChain and LangGraph tests."""

from __future__ import annotations

import threading
from typing import Any, List

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

# Identifiers planted in the first turn: a lossy summarizer drops them, the
# ledger keeps them.
FIRST_TURN_IDS = ["ORD-7731-QX", "INC-2024-00917", "acct_9f3Kd82LmQ", "build-4471.tar.gz"]


class Scripted(BaseChatModel):
    """An agent's model: parallel tool calls for a new question (``calls`` of
    them, for ``rounds`` rounds), then an answer. Records every message list
    it receives."""

    calls: int = 2
    rounds: int = 1
    answer_words: int = 30
    _seen: List[List[BaseMessage]] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _rounds: dict = PrivateAttr(default_factory=dict)
    _question: str = PrivateAttr(default="")

    @property
    def seen(self) -> List[List[BaseMessage]]:
        return self._seen

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "Scripted":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        with self._lock:
            self._seen.append(list(messages))
            n = len(self._seen)
        # Rounds of calls made for the newest question (the last one seen
        # when a compaction folded it).
        newest = next((m for m in reversed(messages) if is_question(m)), None)
        with self._lock:
            if newest is not None:
                self._question = newest.content
            since = self._rounds.get(self._question, 0)
            self._rounds[self._question] = since + 1
        if since < self.rounds:
            calls = [
                {"name": "lookup", "args": {"order": f"ORD-{n}-{k}"}, "id": f"call_{n}_{k}"} for k in range(self.calls)
            ]
            message = AIMessage(content="", tool_calls=calls)
        else:
            message = AIMessage(content="Here is what I found. " + "detail " * self.answer_words)
        return ChatResult(generations=[ChatGeneration(message=message)])


class Summarizer(BaseChatModel):
    """A summarizer model: a lossy one-line summary (``reply``), an empty one,
    or an error (``fail``). Records every message list it receives."""

    reply: str = "The user asked about several orders; all were looked up."
    fail: bool = False
    _seen: List[List[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def seen(self) -> List[List[BaseMessage]]:
        return self._seen

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self._seen.append(list(messages))
        if self.fail:
            raise RuntimeError("the summary model is down")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])


@tool
def lookup(order: str) -> str:
    """Looks an order up by its number."""
    return f"Order {order}: shipped from the Rotterdam warehouse. " + "Tracking history line. " * 12


def question(i: int) -> HumanMessage:
    """The user's i-th question; the first carries :data:`FIRST_TURN_IDS`."""
    text = f"Question {i}: where are my orders? " + "Please check carefully. " * 8
    if i == 0:
        text = f"My order {FIRST_TURN_IDS[0]} (incident {FIRST_TURN_IDS[1]}, account {FIRST_TURN_IDS[2]}) never came; the file {FIRST_TURN_IDS[3]} has the invoice. " + text
    return HumanMessage(content=text)


def orphans(messages: List[BaseMessage]) -> List[str]:
    """Tool results without an earlier call, and calls without every result."""
    problems: List[str] = []
    issued: set = set()
    answered: set = set()
    for m in messages:
        if isinstance(m, AIMessage):
            issued.update(c["id"] for c in m.tool_calls)
        elif isinstance(m, ToolMessage):
            if m.tool_call_id not in issued:
                problems.append(f"result {m.tool_call_id} without its call")
            answered.add(m.tool_call_id)
    problems += [f"call {c} without its result" for c in issued - answered]
    return problems


def summaries(messages: List[BaseMessage], prefix: str) -> int:
    """How many messages of ``messages`` are summaries starting with ``prefix``."""
    return sum(1 for m in messages if isinstance(m.content, str) and m.content.startswith(prefix))


def is_question(message: BaseMessage) -> bool:
    """Whether ``message`` is one of :func:`question`'s."""
    return isinstance(message, HumanMessage) and str(message.content).startswith(("Question", "My order"))


def text_of(messages: List[List[BaseMessage]]) -> str:
    return "\n".join(str(m.content) for ms in messages for m in ms)
