"""LangChain messages through chatfold's core, for :mod:`chatfold.langchain`
and :mod:`chatfold.langgraph`: the messages as OpenAI dicts and back, results
whose call is gone, a LangChain token counter as chatfold's tokenizer, and the
one compaction both front ends run (sync and async share its steps)."""

from __future__ import annotations

import functools
import uuid
from typing import Any, Callable, Dict, Generator, Iterable, List, Optional, Sequence, Tuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages, count_tokens_approximately

from . import Compaction, Compactor, SummaryRequest
from ._drive import drive
from .errors import InvalidConfig, SummarizerError

TokenCounter = Callable[[Iterable[Any]], int]

def answer_text(answer: Any) -> str:
    """A model's answer (a message, or a string) as text, trimmed."""
    text = str(answer.text) if isinstance(answer, BaseMessage) else answer
    if not isinstance(text, str):
        raise TypeError(f"a summarizer must return a str, got {type(text).__name__}")
    return text.strip()


class Fallback:
    """What a front end does when its summarizer fails or returns nothing:
    ``"raise"`` (the error propagates, nothing changes) or ``"extractive"``
    (chatfold's extractive summary in its place, noted on the summary)."""

    def __init__(self, on_error: str) -> None:
        if on_error not in ("raise", "extractive"):
            raise InvalidConfig(f'on_summarizer_error must be "raise" or "extractive", not {on_error!r}')
        self.on_error = on_error
        self.error: Optional[str] = None

    def checked(self, answer: Any) -> str:
        """The summary in ``answer``; an empty one is an error."""
        text = answer_text(answer)
        if not text:
            raise SummarizerError("the summarizer returned an empty summary")
        return text

    def failed(self, request: Any, error: Exception) -> str:
        """The extractive summary for ``request``, or ``error`` raised."""
        if self.on_error != "extractive":
            raise error
        self.error = f"{type(error).__name__}: {error}"
        return request._extractive()

    def note(self, summary: BaseMessage) -> None:
        """Says on ``summary`` that the extractive summary stood in."""
        if self.error is not None:
            summary.additional_kwargs["chatfold"] = {"summary": "extractive", "error": self.error}


def without_orphans(messages: Sequence[BaseMessage]) -> List[BaseMessage]:
    """``messages`` less every tool result whose call no earlier assistant
    message made (a provider rejects such a result)."""
    issued: set = set()
    kept: List[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage):
            issued.update(call.get("id") for call in message.tool_calls)
            issued.update(call.get("id") for call in message.invalid_tool_calls)
        elif isinstance(message, ToolMessage) and message.tool_call_id not in issued:
            continue
        kept.append(message)
    return kept


def stand_in(message: BaseMessage) -> Dict[str, Any]:
    """A LangChain message as the core's OpenAI message: content blocks as
    their text (a provider's own blocks, such as Claude's thinking, are not
    the core's to read), invalid tool calls among the calls (a result may
    answer one, and must stay with it)."""
    out = convert_to_openai_messages(message)
    if isinstance(out.get("content"), list):
        out["content"] = str(message.text)
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        calls = list(out.get("tool_calls") or [])
        for call in message.invalid_tool_calls:
            if call.get("id"):
                arguments = call.get("args") or ""
                calls.append({"id": call["id"], "type": "function", "function": {"name": call.get("name") or "", "arguments": str(arguments)}})
        out["tool_calls"] = calls
    return out


def is_heuristic(counter: Any) -> bool:
    """Whether ``counter`` is LangChain's approximate counter at four
    characters a token, which chatfold's ``"heuristic"`` tokenizer matches."""
    if isinstance(counter, functools.partial):
        return counter.func is count_tokens_approximately and counter.keywords.get("chars_per_token", 4.0) == 4.0
    return counter is count_tokens_approximately


class TextCounter:
    """A LangChain token counter (messages to tokens) as chatfold's
    tokenizer (text to tokens): a message of ``text`` less an empty one."""

    def __init__(self, count: TokenCounter) -> None:
        self._count = count
        self._empty = count([HumanMessage(content="")])

    def __call__(self, text: str) -> int:
        return max(0, self._count([HumanMessage(content=text)]) - self._empty)


def tokenizer_for(counter: TokenCounter) -> Any:
    """chatfold's tokenizer for a LangChain token counter."""
    return "heuristic" if is_heuristic(counter) else TextCounter(counter)


class Folding:
    """One compaction of a LangChain message list by chatfold's core.

    The summary is a ``summary_role`` message starting with
    ``summary_prefix`` (``make_summary`` makes it a LangChain message); a
    message of that shape in ``messages`` is the running summary the fold
    extends. The task (the first user message) and the turn's question (the
    newest) are pinned: the core keeps them verbatim after the summary.
    :meth:`aim` asks the core's budget recipe for the target before
    :meth:`run` or :meth:`arun`.
    """

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        *,
        tokenizer: Any,
        summary_prefix: str,
        summary_role: str,
        make_summary: Callable[[str], BaseMessage],
        max_summary_tokens: Optional[int] = None,
        max_fold_input_tokens: Optional[int] = None,
        ledger: bool = True,
    ) -> None:
        self.messages = list(messages)
        self.dicts = [stand_in(m) for m in self.messages]
        self.make_summary = make_summary
        self.max_summary_tokens = max_summary_tokens
        self._base = Compactor(
            1,
            tokenizer=tokenizer,
            summary_role=summary_role,
            summary_prefix=summary_prefix,
            max_summary_tokens=max_summary_tokens,
            max_fold_input_tokens=max_fold_input_tokens,
            ledger=ledger,
            pin="first-user,last-user",
        )
        self._aim: Any = None
        self.count: Callable[[List[BaseMessage]], int] = lambda ms: 0

    def aim(
        self,
        *,
        keep: Tuple[str, float],
        trigger: Sequence[Tuple[str, float]],
        window: Optional[int],
        count: Callable[[List[BaseMessage]], int],
    ) -> "Folding":
        """Sets the target by the core's budget recipe: ``count`` is the
        caller's measure of the messages the model is sent (system prompt and
        tools included), which the result must end under the smallest token
        ``trigger``."""
        self.count = count
        measured = (count(self.messages), count([]))
        self._aim = self._base.aim(
            self.dicts,
            keep=keep,
            trigger=list(trigger),
            window=window,
            max_summary_tokens=self.max_summary_tokens,
            measured=measured,
        )
        return self

    def tries(self) -> Generator[Compactor, Compaction, Optional["Folded"]]:
        """The compactions to run, each sent back its result, while the
        recipe gives a smaller budget for a result the caller's counter finds
        at its limit. Returns the fold, or ``None`` when nothing was folded."""
        folded: Optional[Folded] = None
        while True:
            compaction = yield self._aim.compactor()
            if not compaction.summarized:
                return folded
            folded = Folded(self, compaction)
            if self._aim.next(self.count(folded.messages)) is None:
                return folded

    def run(self, summarize: Callable[[SummaryRequest], str]) -> Optional["Folded"]:
        """The compaction, with a synchronous summarizer."""
        steps = self.tries()
        compactor = next(steps)
        while True:
            if isinstance(summarize, Fallback):
                summarize.error = None
            try:
                compactor = steps.send(compactor.compact(self.dicts, summarize))
            except StopIteration as done:
                return done.value

    async def arun(self, summarize: Callable[[SummaryRequest], Any]) -> Optional["Folded"]:
        """The compaction, with a summarizer that may be a coroutine function."""
        steps = self.tries()
        compactor = next(steps)
        while True:
            if isinstance(summarize, Fallback):
                summarize.error = None
            compaction = await drive(compactor._begin_compact(self.dicts), summarize)
            try:
                compactor = steps.send(compaction)
            except StopIteration as done:
                return done.value


class Folded:
    """A compaction's outcome in LangChain's messages, the caller's own
    objects: the system messages from the folded part, the summary, the
    pinned messages (the task, the turn's question), the kept messages."""

    def __init__(self, folding: Folding, compaction: Compaction) -> None:
        fates = compaction.report["fates"]
        self.compaction = compaction
        hoisted = [m for m, fate in zip(folding.messages, fates) if fate == "hoisted"]
        # The core writes the hoisted messages, then the summary, the pinned ones, the kept part.
        self.summary = folding.make_summary(compaction.messages[len(hoisted)]["content"])
        self.hoisted = hoisted
        self.kept = [m for m, fate in zip(folding.messages, fates) if fate == "pinned"]
        self.kept += [m for m, fate in zip(folding.messages, fates) if fate == "kept"]
        if self.summary.id is None:
            self.summary.id = str(uuid.uuid4())

    @property
    def messages(self) -> List[BaseMessage]:
        """The messages the model is sent."""
        return [*self.hoisted, self.summary, *self.kept]


class ChatModelSummarizer:
    """A LangChain chat model as chatfold's summarizer: it is sent the prompt
    chatfold's HTTP summarizers send (:meth:`chatfold.SummaryRequest.prompt`;
    ``system`` and ``user`` templates replace it), or, given ``template``, one
    user message: ``template.format(messages=request.transcript)``.

    Usable wherever chatfold takes a summarizer: called for a synchronous
    compaction, and through :meth:`asummarize` (the model's ``ainvoke``) by
    ``compact_async`` and the async memories.
    """

    def __init__(
        self,
        model: Any,
        *,
        system: Optional[str] = None,
        user: Optional[str] = None,
        template: Optional[str] = None,
        config: Optional[Dict[str, Any]] = None,
    ) -> None:
        if template is not None and (system is not None or user is not None):
            raise InvalidConfig("give either template or system and user, not both")
        self.model = model
        self._system = system
        self._user = user
        self._template = template
        self._config = config

    def messages(self, request: Any) -> List[BaseMessage]:
        """What the model is sent for ``request``."""
        if self._template is not None:
            return [HumanMessage(content=self._template.format(messages=request.transcript).rstrip())]
        system, user = request.prompt(self._system, self._user)
        return [SystemMessage(content=system), HumanMessage(content=user)]

    def __call__(self, request: Any) -> str:
        return answer_text(self.model.invoke(self.messages(request), config=self._config))

    async def asummarize(self, request: Any) -> str:
        """The summary, from the model's ``ainvoke``."""
        return answer_text(await self.model.ainvoke(self.messages(request), config=self._config))
