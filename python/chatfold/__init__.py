"""chatfold: keep LLM chat histories inside a token budget.

A Rust core (the ``chatfold`` crate) with a thin Python layer: the
:class:`Compactor` keeps system messages and recent turns verbatim and folds
the older middle into one summary message; the memories keep a conversation
across turns with the same rules. Messages are plain OpenAI-style dicts (or
Anthropic request bodies), read and written back without loss.
"""

from __future__ import annotations

import os as _os
from typing import Any, Callable, List, Mapping, Optional, Union

from . import _chatfold
from ._chatfold import AnthropicSummarizer, Compaction, OpenAISummarizer, SummaryRequest, count_tokens
from ._drive import drive
from .errors import (
    BudgetUnreachable,
    ChatfoldError,
    InvalidConfig,
    InvalidInput,
    InvalidMessage,
    InvalidState,
    SummarizerError,
)
from .memory import (
    AsyncRollingMemory,
    AsyncSummaryMemory,
    BufferMemory,
    RollingMemory,
    SummaryMemory,
    TieredMemory,
    WindowMemory,
)

__version__: str = _chatfold.__version__

# A fork waits for chatfold's work under way on other threads (a lock or a
# one-time build held at the fork would stay held in the child forever),
# and no new work starts until the fork is done.
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(
        before=_chatfold.before_fork,
        after_in_parent=_chatfold.after_fork,
        after_in_child=lambda: _chatfold.after_fork(True),
    )

Messages = Union[List[Mapping[str, Any]], Mapping[str, Any]]

class Compactor(_chatfold.Compactor):
    """Keeps a chat history inside ``budget`` tokens.

    System messages and the most recent turns (``keep_recent`` tokens, a
    quarter of the fold target by default) stay verbatim; the older middle is folded into
    one summary message, marked so that a later compaction rolls it forward.
    A history over the budget is folded down to ``fold_to`` tokens (half the
    budget by default), so that later turns extend an unchanged prefix, which
    providers bill at a tenth, until the budget is passed again.
    ``tokenizer`` is ``"o200k_base"`` (the default), ``"cl100k_base"``, a
    model name, ``"heuristic"`` (four characters a token), or a callable
    ``count(text) -> int``. ``format`` reads the input as ``"openai"`` or
    ``"anthropic"`` (by default: as the body says).

    ``pin`` keeps messages verbatim right after the summary wherever they
    stand, counted against the budget: ``"first-user"`` (the task),
    ``"last-user"`` (the turn's question), an index, or a callable given each
    message dict; one, a comma-separated string, or a list. Pins that alone
    pass the budget raise :class:`BudgetUnreachable`.

    ``reuse`` keeps summaries for the next compaction of the same history
    (a client that resends its whole transcript gets the last fold replayed,
    the same prefix, until the budget is passed again); ``redis`` (a
    ``redis://`` URL) keeps them in Redis, shared by every process that uses
    it; ``namespace`` names the summarizer in their keys.

    :meth:`aim` is the budget recipe a framework's middleware drives: its
    trigger and ``keep`` as this compactor's budget and ``keep_recent``.

    With a built-in tokenizer the work runs in Rust with the GIL released.
    """

    def compact(self, messages: Messages, summarize: Optional[Any] = None) -> Compaction:
        """Compacts ``messages`` (a list of message dicts, or a request body).

        ``summarize`` is a callable ``f(request) -> str`` (see
        :class:`SummaryRequest`), or ``None`` / ``"extractive"`` for the
        built-in summarizer that needs no model. A summarizer's exception is
        raised as itself and nothing is changed.
        """
        return super().compact(messages, summarize)

    async def compact_async(
        self, messages: Messages, summarize: Callable[[SummaryRequest], Any]
    ) -> Compaction:
        """:meth:`compact` with an async summarizer (a coroutine function;
        a plain function works too), awaited between the fold's steps."""
        return await drive(self._begin_compact(messages), summarize)

__all__ = [
    "Compactor",
    "Compaction",
    "SummaryRequest",
    "count_tokens",
    "OpenAISummarizer",
    "AnthropicSummarizer",
    "RollingMemory",
    "AsyncRollingMemory",
    "BufferMemory",
    "WindowMemory",
    "SummaryMemory",
    "AsyncSummaryMemory",
    "TieredMemory",
    "ChatfoldError",
    "InvalidConfig",
    "InvalidMessage",
    "InvalidInput",
    "InvalidState",
    "SummarizerError",
    "BudgetUnreachable",
]
