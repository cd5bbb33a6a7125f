"""chatfold for LangChain agents: :class:`SummarizationMiddleware`, a drop-in
for ``langchain.agents.middleware.SummarizationMiddleware`` (same parameters,
same state update), and :class:`ChatModelSummarizer`, a LangChain chat model
as the summarizer of any chatfold API.

Change one import::

    from chatfold.langchain import SummarizationMiddleware
    agent = create_agent(model, tools, middleware=[
        SummarizationMiddleware(model, trigger=("tokens", 3000), keep=("messages", 20)),
    ])

What it does beyond LangChain's own (langchain 1.5):

- **The trigger counts what the model is sent**: the system prompt and the
  tool schemas are counted with the messages, and the request after a
  compaction is under every token trigger, by the middleware's own
  ``token_counter``.
- **No orphaned tool message**: calls and their results (parallel ones too)
  are folded or kept together, and a tool result already without its call in
  the history is not sent.
- **The whole folded span is summarized**: ``trim_tokens_to_summarize`` is
  the most one summarizer call reads; a longer span is folded in chunks of
  whole turns, each extending the previous chunk's summary, instead of the
  summarizer seeing only the span's last tokens.
- **The task and the turn's question stay verbatim**: the first user
  message and the newest stand right after the summary in every request,
  and the turn in progress (the question and the calls made since) stays
  whole whenever it fits under the trigger beside a summary.
- **The ledger**: the summary ends with the exact identifiers it folded.
- **A failing summarizer changes nothing**: its error propagates (after the
  model's retries) and the state is as it was; an empty summary is an error
  too. ``on_summarizer_error="extractive"`` puts chatfold's extractive
  summary in its place instead, and the summary message says so in its
  ``additional_kwargs["chatfold"]``.
- **A running summary**: the next compaction extends the previous summary
  message (LangChain's, or this middleware's) rather than summarizing it as
  a user turn.

The compaction runs in ``wrap_model_call`` / ``awrap_model_call``, where the
tools and the system prompt are known; the state update is LangChain's own:
``RemoveMessage(REMOVE_ALL_MESSAGES)``, the summary as a ``HumanMessage``
(``additional_kwargs={"lc_source": "summarization"}``), then the kept
messages, then the model's answer.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware import SummarizationMiddleware as _LangChainSummarization
from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langchain_core.messages.utils import convert_to_messages
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from ._lc import ChatModelSummarizer, Fallback, Folded, Folding, tokenizer_for, without_orphans

__all__ = ["SummarizationMiddleware", "ChatModelSummarizer", "SUMMARY_PREFIX"]

#: The text LangChain's summary message starts with.
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"

_SUMMARY_CONFIG: Dict[str, Any] = {"metadata": {"lc_source": "summarization"}, "tags": [TAG_NOSTREAM]}


class _Attempt(Fallback):
    """One compaction's summarizer: the middleware's model or ``summarizer``."""

    def __init__(self, middleware: "SummarizationMiddleware") -> None:
        super().__init__(middleware.on_summarizer_error)
        self.middleware = middleware

    @staticmethod
    def _folded_messages(request: Any) -> List[AnyMessage]:
        previous = request.previous_summary
        head = [HumanMessage(content=SUMMARY_PREFIX + previous)] if previous else []
        return head + convert_to_messages(request.messages)

    def __call__(self, request: Any) -> str:
        m = self.middleware
        try:
            if m.summarizer is not None:
                return self.checked(m.summarizer.invoke(self._folded_messages(request), config=_SUMMARY_CONFIG))
            return self.checked(m._summary_model.invoke(m._prompt(request), config=_SUMMARY_CONFIG))
        except Exception as error:
            return self.failed(request, error)

    async def asummarize(self, request: Any) -> str:
        m = self.middleware
        try:
            if m.summarizer is not None:
                answer = await m.summarizer.ainvoke(self._folded_messages(request), config=_SUMMARY_CONFIG)
            else:
                answer = await m._summary_model.ainvoke(m._prompt(request), config=_SUMMARY_CONFIG)
            return self.checked(answer)
        except Exception as error:
            return self.failed(request, error)


class SummarizationMiddleware(_LangChainSummarization):
    """LangChain's ``SummarizationMiddleware`` on chatfold's core.

    Takes the parameters of ``langchain.agents.middleware.SummarizationMiddleware``
    as the installed langchain names them (``model``, ``trigger``, ``keep``,
    ``token_counter``, ``summary_prompt``, ``trim_tokens_to_summarize``,
    ``summarizer`` and the deprecated ones), and decides *whether* to
    summarize as it does, counting the system prompt and the tool schemas
    too. chatfold's own:

    - ``on_summarizer_error``: ``"raise"`` (the default: the error
      propagates, nothing changes) or ``"extractive"`` (chatfold's
      extractive summary in its place, said in the summary message's
      ``additional_kwargs["chatfold"]``).
    - ``max_summary_tokens``: the most the summary may take; by default what
      the trigger leaves beside the kept messages, or 1 000 tokens when only
      a message count triggers (the core's budget recipe,
      :meth:`chatfold.Compactor.aim`).
    - ``ledger``: the summary's ledger of exact identifiers (on by default).

    With the default ``summary_prompt`` the model is sent the prompt
    chatfold's HTTP summarizers send (previous summary, allowance,
    identifiers to keep); a custom one is formatted with ``{messages}`` as
    LangChain does, the previous summary first.
    """

    # The compaction runs around the model call (where tools and the system
    # prompt are known), not as LangChain's before-model step.
    before_model = AgentMiddleware.before_model
    abefore_model = AgentMiddleware.abefore_model

    def __init__(
        self,
        model: Any,
        *,
        on_summarizer_error: str = "raise",
        max_summary_tokens: Optional[int] = None,
        ledger: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        Fallback(on_summarizer_error)  # checked now
        self.on_summarizer_error = on_summarizer_error
        self.max_summary_tokens = max_summary_tokens
        self.ledger = ledger
        self._tokenizer = tokenizer_for(self._partial_token_counter)

    # -- LangChain's parameters, read once per request --------------------

    def _prompt(self, request: Any) -> List[BaseMessage]:
        if self.summary_prompt == DEFAULT_SUMMARY_PROMPT:
            system, user = request.prompt()
            return [SystemMessage(content=system), HumanMessage(content=user)]
        return [HumanMessage(content=self.summary_prompt.format(messages=request.transcript).rstrip())]

    def _recipe(self) -> Tuple[Tuple[str, float], List[Tuple[str, float]], Optional[int]]:
        """LangChain's ``keep`` and ``trigger`` as the core's budget recipe
        takes them, and the model's window: a clause's token or fraction
        part is a limit the result must end under; a clause of a message
        count alone, a count that folds to ``keep``."""
        window = self._get_profile_limits()
        trigger: List[Tuple[str, float]] = []
        for clause in self._trigger_clauses:
            if "tokens" in clause:
                trigger.append(("tokens", int(clause["tokens"])))
            if "fraction" in clause and window is not None:
                trigger.append(("fraction", float(clause["fraction"])))
            if set(clause) == {"messages"}:
                trigger.append(("messages", int(clause["messages"])))
        kind, value = self.keep
        return (kind, value), trigger, window

    def _counter(self, request: ModelRequest) -> Callable[[List[BaseMessage]], int]:
        """The token counter of what the model is sent for ``messages``: the
        system prompt and the tool schemas with them (given to a counter that
        takes ``tools``, as LangChain's approximate one does; counted as one
        message of their JSON schemas by any other)."""
        system = [request.system_message] if request.system_message is not None else []
        tools = list(request.tools or [])
        if not tools:
            return lambda ms: self.token_counter(system + ms)
        try:
            takes_tools = "tools" in inspect.signature(self.token_counter).parameters
        except (TypeError, ValueError):
            takes_tools = False
        if takes_tools:
            return lambda ms: self.token_counter(system + ms, tools=tools)
        schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        fixed = self.token_counter([HumanMessage(content=json.dumps(schemas))])
        return lambda ms: self.token_counter(system + ms) + fixed

    def _folding(self, request: ModelRequest, messages: List[BaseMessage]) -> Optional[Folding]:
        """The compaction this request needs, aimed under the trigger, or ``None``."""
        count = self._counter(request)
        if not self._should_summarize(messages, count(messages)):
            return None
        folding = Folding(
            messages,
            tokenizer=self._tokenizer,
            summary_prefix=SUMMARY_PREFIX,
            summary_role="user",
            make_summary=_summary_message,
            max_summary_tokens=self.max_summary_tokens,
            max_fold_input_tokens=self.trim_tokens_to_summarize,
            ledger=self.ledger,
        )
        keep, trigger, window = self._recipe()
        return folding.aim(keep=keep, trigger=trigger, window=window, count=count)

    # -- around the model call -------------------------------------------

    def _prepared(self, request: ModelRequest) -> Tuple[ModelRequest, Optional[Folding]]:
        """The request without orphaned tool results, and its compaction."""
        messages = without_orphans(request.messages)
        self._ensure_message_ids(messages)
        if len(messages) != len(request.messages):
            request = request.override(messages=messages)
        return request, self._folding(request, messages)

    @staticmethod
    def _with_update(folded: Folded, response: Any) -> ExtendedModelResponse:
        """The model's answer, with LangChain's state update for the compaction."""
        command = None
        if isinstance(response, ExtendedModelResponse):
            response, command = response.model_response, response.command
        if not isinstance(response, ModelResponse):
            response = ModelResponse(result=[response])
        update: Dict[str, Any] = dict(command.update or {}) if command is not None else {}
        update["messages"] = [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            *folded.messages,
            *response.result,
            *update.get("messages", []),
        ]
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Compacts the request when the trigger is met, then calls the model."""
        request, folding = self._prepared(request)
        attempt = _Attempt(self)
        folded = folding.run(attempt) if folding is not None else None
        if folded is None:
            return handler(request)
        attempt.note(folded.summary)
        return self._with_update(folded, handler(request.override(messages=folded.messages)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """:meth:`wrap_model_call` for async agents (the summarizer awaited)."""
        request, folding = self._prepared(request)
        attempt = _Attempt(self)
        folded = await folding.arun(attempt) if folding is not None else None
        if folded is None:
            return await handler(request)
        attempt.note(folded.summary)
        return self._with_update(folded, await handler(request.override(messages=folded.messages)))


def _summary_message(text: str) -> HumanMessage:
    return HumanMessage(content=text, additional_kwargs={"lc_source": "summarization"})
