"""chatfold for LangGraph: :class:`SummarizationNode`, a drop-in for langmem's
``SummarizationNode`` (same parameters, same state), as a ``pre_model_hook``
of ``create_react_agent`` or a node of a custom graph.

Change one import::

    from chatfold.langgraph import SummarizationNode, RunningSummary

    hook = SummarizationNode(model=model, max_tokens=2000, max_summary_tokens=256,
                             output_messages_key="llm_input_messages")
    agent = create_react_agent(model, tools, pre_model_hook=hook, state_schema=State)

where ``State`` has a ``context: dict[str, Any]`` key, as with langmem. The
running summary is kept as langmem keeps it: ``context["running_summary"]``, a
:class:`RunningSummary` (langmem's own is read too). What differs from
langmem 0.0.30:

- **No orphaned tool message**: parallel tool calls and their results are
  folded or kept together (langmem #126), and a result whose call is already
  summarized, or was never made, is not sent.
- **The newest turn is never dropped**: the question after a tool call is
  kept (langmem #111), and the node's output fits ``max_tokens`` whenever the
  system message, the newest turn and a summary can.
- **The summary covers everything folded**, ends with the ledger of exact
  identifiers, and extends the running summary; an empty summary is an
  error, and a failing model changes nothing (its error propagates), unless
  ``on_summarizer_error="extractive"``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

from langchain_core.messages import BaseMessage, RemoveMessage, SystemMessage
from langchain_core.messages.utils import convert_to_messages, count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.utils.runnable import RunnableCallable

from ._lc import ChatModelSummarizer, Fallback, Folded, Folding, tokenizer_for, without_orphans
from .errors import InvalidConfig

__all__ = ["SummarizationNode", "RunningSummary", "SUMMARY_PREFIX"]

#: The text langmem's summary message starts with.
SUMMARY_PREFIX = "Summary of the conversation so far: "


@dataclass
class RunningSummary:
    """The running summary in the graph state, as langmem keeps it."""

    summary: str
    """The summary (with chatfold's ledger), updated at every fold."""

    summarized_message_ids: Set[str]
    """The ids of every message folded so far."""

    last_summarized_message_id: Optional[str]
    """The id of the newest message folded."""


class _Summarize(Fallback):
    """The node's summarizer: langmem's prompts where given, chatfold's otherwise."""

    def __init__(self, node: "SummarizationNode") -> None:
        super().__init__(node.on_summarizer_error)
        self.node = node

    def _messages(self, request: Any) -> List[BaseMessage]:
        node = self.node
        previous = request.previous_summary
        template = node.existing_summary_prompt if previous else node.initial_summary_prompt
        if template is None:
            return ChatModelSummarizer(node.model).messages(request)
        values = {"messages": convert_to_messages(request.messages)}
        if previous:
            values["existing_summary"] = previous
        return template.invoke(values).messages

    def __call__(self, request: Any) -> str:
        try:
            return self.checked(self.node.model.invoke(self._messages(request)))
        except Exception as error:
            return self.failed(request, error)

    async def asummarize(self, request: Any) -> str:
        try:
            return self.checked(await self.node.model.ainvoke(self._messages(request)))
        except Exception as error:
            return self.failed(request, error)


class SummarizationNode(RunnableCallable):
    """langmem's ``SummarizationNode`` on chatfold's core.

    Takes langmem's parameters: ``model``, ``max_tokens`` (the most the
    output may take), ``max_tokens_before_summary`` (the size that triggers a
    fold; ``max_tokens`` when unset), ``max_summary_tokens`` (the summary's
    most), ``token_counter``, ``initial_summary_prompt`` and
    ``existing_summary_prompt`` (chat prompt templates with a ``messages``
    placeholder, the second with ``existing_summary``; when not given the
    model is sent the prompt chatfold's HTTP summarizers send),
    ``final_prompt`` (accepted for the signature: the summary is a system
    message starting with :data:`SUMMARY_PREFIX`, after the first system
    message, as langmem's default writes it), ``input_messages_key``,
    ``output_messages_key`` and ``name``. chatfold's own:
    ``on_summarizer_error`` (``"raise"`` or ``"extractive"``) and ``ledger``.

    Returns ``{output_messages_key: messages, "context": {..., "running_summary": ...}}``
    (``context`` only once something is summarized); when the two keys are
    the same, the messages start with ``RemoveMessage(REMOVE_ALL_MESSAGES)``,
    as langmem's do.
    """

    def __init__(
        self,
        *,
        model: Any,
        max_tokens: int,
        max_tokens_before_summary: Optional[int] = None,
        max_summary_tokens: int = 256,
        token_counter: Any = count_tokens_approximately,
        initial_summary_prompt: Any = None,
        existing_summary_prompt: Any = None,
        final_prompt: Any = None,
        input_messages_key: str = "messages",
        output_messages_key: str = "summarized_messages",
        name: str = "summarization",
        on_summarizer_error: str = "raise",
        ledger: bool = True,
    ) -> None:
        super().__init__(self._func, self._afunc, name=name, trace=False)
        if max_tokens < 1:
            raise InvalidConfig(f"max_tokens must be at least 1, not {max_tokens}")
        Fallback(on_summarizer_error)  # checked now
        self.model = model
        self.max_tokens = max_tokens
        self.max_tokens_before_summary = max_tokens_before_summary
        self.max_summary_tokens = max_summary_tokens
        self.token_counter = token_counter
        self.initial_summary_prompt = initial_summary_prompt
        self.existing_summary_prompt = existing_summary_prompt
        self.final_prompt = final_prompt
        self.input_messages_key = input_messages_key
        self.output_messages_key = output_messages_key
        self.on_summarizer_error = on_summarizer_error
        self.ledger = ledger
        self._tokenizer = tokenizer_for(token_counter)

    def _parse_input(self, input: Any) -> Tuple[List[BaseMessage], Dict[str, Any]]:
        if isinstance(input, dict):
            messages, context = input.get(self.input_messages_key), input.get("context") or {}
        else:
            messages = getattr(input, self.input_messages_key, None)
            context = getattr(input, "context", None) or {}
        if messages is None:
            raise InvalidConfig(f"missing required field `{self.input_messages_key}` in the input")
        return list(messages), dict(context)

    def _prepare(self, input: Any) -> Tuple[Dict[str, Any], List[BaseMessage], Optional[Folding], Any]:
        """The context, the model's messages as they stand, and the fold they need."""
        messages, context = self._parse_input(input)
        running = context.get("running_summary")
        for m in messages:
            if m.id is None:
                m.id = str(uuid.uuid4())
        system: List[BaseMessage] = []
        if messages and isinstance(messages[0], SystemMessage) and not _is_summary(messages[0]):
            system, messages = [messages[0]], messages[1:]
        done: Set[str] = set(running.summarized_message_ids) if running is not None else set()
        # Messages already in the running summary, or a summary message the
        # node wrote to the state, are not sent again.
        rest = [m for m in messages if m.id not in done and not (running is not None and _is_summary(m))]
        head = [SystemMessage(content=SUMMARY_PREFIX + running.summary)] if running is not None else []
        sent = system + head + without_orphans(rest)
        limit = self.max_tokens_before_summary or self.max_tokens
        if self.token_counter(sent) <= limit:
            return context, sent, None, running
        folding = Folding(
            sent,
            tokenizer=self._tokenizer,
            summary_prefix=SUMMARY_PREFIX,
            summary_role="system",
            make_summary=lambda text: SystemMessage(content=text),
            max_summary_tokens=self.max_summary_tokens,
            ledger=self.ledger,
        )
        # The result must end at max_tokens; half of it is kept verbatim.
        trigger = [("tokens", self.max_tokens + 1)]
        aimed = folding.aim(keep=("tokens", self.max_tokens // 2), trigger=trigger, window=None, count=self.token_counter)
        return context, sent, aimed, running

    def _update(
        self, context: Dict[str, Any], sent: List[BaseMessage], folded: Optional[Folded], running: Any, fallback: Fallback
    ) -> Dict[str, Any]:
        if folded is None:
            return {self.output_messages_key: self._replacing(sent)}
        ids = set(running.summarized_message_ids) if running is not None else set()
        last = running.last_summarized_message_id if running is not None else None
        fates = folded.compaction.report["fates"]
        for m, fate in zip(sent, fates):
            if fate == "folded" and m.id is not None:
                ids.add(m.id)
                last = m.id
        text = folded.summary.content
        fallback.note(folded.summary)
        summary = RunningSummary(
            summary=text[len(SUMMARY_PREFIX):] if text.startswith(SUMMARY_PREFIX) else text,
            summarized_message_ids=ids,
            last_summarized_message_id=last,
        )
        return {self.output_messages_key: self._replacing(folded.messages), "context": {**context, "running_summary": summary}}

    def _replacing(self, messages: List[BaseMessage]) -> List[Any]:
        """``messages``, replacing the state's when they go to the input key."""
        if self.input_messages_key == self.output_messages_key:
            return [RemoveMessage(REMOVE_ALL_MESSAGES), *messages]
        return messages

    def _func(self, input: Any) -> Dict[str, Any]:
        context, sent, folding, running = self._prepare(input)
        summarize = _Summarize(self)
        folded = folding.run(summarize) if folding is not None else None
        return self._update(context, sent, folded, running, summarize)

    async def _afunc(self, input: Any) -> Dict[str, Any]:
        context, sent, folding, running = self._prepare(input)
        summarize = _Summarize(self)
        folded = await folding.arun(summarize) if folding is not None else None
        return self._update(context, sent, folded, running, summarize)


def _is_summary(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage) and isinstance(message.content, str) and message.content.startswith(SUMMARY_PREFIX)
