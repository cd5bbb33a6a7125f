"""chatfold for the OpenAI Agents SDK: :class:`CompactingSession` keeps any
session's items within a token budget for any model, and
:class:`ModelSummarizer` makes an Agents SDK model a chatfold summarizer.

Wrap the session you have::

    from agents import Runner, SQLiteSession
    from chatfold.agents import CompactingSession

    session = CompactingSession(SQLiteSession("user-42", "chats.db"), budget=8000)
    result = await Runner.run(agent, "Where is my order?", session=session)

The items are the Responses API's, as the SDK stores them, compacted by
chatfold's core in its ``responses`` format: function calls stay with their
outputs (parallel ones too), the newest items are kept verbatim, and the
older ones are replaced by one summary item (a ``system`` message that ends
with the ledger of exact identifiers it folded), which the next compaction
extends. It works with every model the SDK drives (Chat Completions models,
LiteLLM, the Responses API): nothing is sent to OpenAI's ``responses.compact``.

A compaction runs after a turn: when the items just stored end with the
assistant's answer (the run's last turn), never in the middle of a run or
while its output streams, and only when the items are over the budget. A
compaction that fails (the summarizer raised or returned nothing) leaves the
items as they were; it is logged and kept in :attr:`CompactingSession.last_error`,
and the next turn tries again. :meth:`CompactingSession.compact` runs one
now and raises its error.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict, List, Optional

from . import Compaction, Compactor
from ._drive import _BLOCKING

__all__ = ["CompactingSession", "ModelSummarizer"]

_log = logging.getLogger("chatfold.agents")


class ModelSummarizer:
    """An Agents SDK ``Model`` (or a model name the SDK's default provider
    resolves) as chatfold's summarizer: it is sent the prompt chatfold's
    HTTP summarizers send (:meth:`chatfold.SummaryRequest.prompt`; ``system``
    and ``user`` templates replace it). The SDK's models are async: use it
    with ``compact_async``, the async memories or :class:`CompactingSession`."""

    def __init__(self, model: Any, *, system: Optional[str] = None, user: Optional[str] = None) -> None:
        if isinstance(model, str):
            from agents.models.multi_provider import MultiProvider

            model = MultiProvider().get_model(model)
        self.model = model
        self._system = system
        self._user = user

    def __call__(self, request: Any) -> str:
        raise TypeError("an Agents SDK model summarizes asynchronously: use compact_async or an async memory")

    async def asummarize(self, request: Any) -> str:
        """The summary: the model's answer to the prompt."""
        from agents import ItemHelpers, ModelSettings, ModelTracing

        system, user = request.prompt(self._system, self._user)
        response = await self.model.get_response(
            system,
            user,
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        return "".join(ItemHelpers.extract_last_text(item) or "" for item in response.output).strip()


def _settled(items: List[Any]) -> bool:
    """Whether ``items`` (a batch the SDK stores) ends a run: its last item is
    the assistant's message."""
    if not items:
        return False
    last = items[-1]
    if not isinstance(last, dict):
        last = getattr(last, "model_dump", lambda **_: {})(exclude_unset=True)
    return last.get("role") == "assistant" and last.get("type", "message") == "message"


class CompactingSession:
    """A ``Session`` that keeps ``session``'s items within ``budget`` tokens.

    ``summarize`` is any chatfold summarizer: ``None`` or ``"extractive"``
    (the built-in one, no model), a function or coroutine function
    ``f(request) -> str``, an HTTP summarizer (:class:`chatfold.OpenAISummarizer`,
    :class:`chatfold.AnthropicSummarizer`), an Agents SDK ``Model`` or
    :class:`ModelSummarizer`, or a LangChain :class:`chatfold.langchain.ChatModelSummarizer`.
    The other keywords are :class:`chatfold.Compactor`'s (``keep_recent``,
    ``tokenizer``, ``max_summary_tokens``, ``ledger``, ...).

    Reading, adding, popping and clearing go to ``session``; the items a
    compaction writes replace its items (cleared, then added; if adding
    fails the old items are written back).
    """

    def __init__(self, session: Any, *, budget: int, summarize: Any = None, **compactor: Any) -> None:
        self.session = session
        self.session_id = session.session_id
        self.summarize = _summarizer(summarize)
        self.compactor = Compactor(budget, format="responses", **compactor)
        self.last_error: Optional[BaseException] = None
        self.last_compaction: Optional[Compaction] = None
        self._lock = asyncio.Lock()

    @property
    def session_settings(self) -> Any:
        """The wrapped session's settings."""
        return getattr(self.session, "session_settings", None)

    async def get_items(self, limit: Optional[int] = None) -> List[Any]:
        """The wrapped session's items (the newest ``limit`` of them)."""
        async with self._lock:
            return await self.session.get_items(limit)

    async def add_items(self, items: List[Any]) -> None:
        """Stores ``items``; when they end a run, compacts what is stored if it
        is over the budget (a failure is logged, the items stay as stored)."""
        async with self._lock:
            await self.session.add_items(items)
            if not _settled(items):
                return
            try:
                await self._compact()
            except Exception as error:  # the items were stored: the turn is not lost
                self.last_error = error
                _log.warning("chatfold: compacting session %s failed: %s", self.session_id, error)

    async def pop_item(self) -> Any:
        """Removes and returns the newest item."""
        async with self._lock:
            return await self.session.pop_item()

    async def clear_session(self) -> None:
        """Removes every item."""
        async with self._lock:
            await self.session.clear_session()

    async def compact(self) -> Optional[Compaction]:
        """Compacts the stored items now if they are over the budget, and
        returns the compaction (``None`` when nothing was folded). Raises
        the summarizer's error; the items are then as they were."""
        async with self._lock:
            return await self._compact()

    async def _compact(self) -> Optional[Compaction]:
        items = await self.session.get_items()
        if not items:
            return None
        if self.summarize is None:
            compaction = self.compactor.compact(items)
        else:
            compaction = await self.compactor.compact_async(items, self.summarize)
        if not compaction.summarized:
            return None
        await self._replace(items, compaction.messages)
        self.last_compaction, self.last_error = compaction, None
        return compaction

    async def _replace(self, old: List[Any], new: List[Dict[str, Any]]) -> None:
        await self.session.clear_session()
        try:
            await self.session.add_items(new)
        except BaseException:
            await self.session.clear_session()
            await self.session.add_items(old)
            raise


def _summarizer(summarize: Any) -> Any:
    """``summarize`` as compact_async takes it (``None``: the built-in one)."""
    if summarize is None or summarize == "extractive":
        return None
    if isinstance(summarize, _BLOCKING) or hasattr(summarize, "asummarize"):
        return summarize
    try:
        from agents.models.interface import Model
    except ImportError:  # the SDK is not installed: any callable will do
        return summarize
    return ModelSummarizer(summarize) if isinstance(summarize, Model) else summarize
