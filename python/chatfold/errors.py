"""chatfold's exceptions.

A summarizer's own exception is never wrapped: it propagates as itself, with
a note saying chatfold changed nothing. These classes are for chatfold's own
errors.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "ChatfoldError",
    "InvalidConfig",
    "InvalidMessage",
    "InvalidInput",
    "InvalidState",
    "SummarizerError",
    "BudgetUnreachable",
]


class ChatfoldError(Exception):
    """Base class of every error chatfold raises itself."""


class InvalidConfig(ChatfoldError, ValueError):
    """A setting is out of range (a budget of 0, ``keep_recent`` above the
    budget, an unknown tokenizer); ``setting`` names it when known."""

    setting: Optional[str] = None


class InvalidMessage(ChatfoldError, ValueError):
    """A message does not have the shape of a chat message: ``index`` is its
    position in the input, ``field`` the field at fault."""

    index: int = 0
    field: str = ""


class InvalidInput(ChatfoldError, ValueError):
    """The input as a whole is not a history or a request body."""


class InvalidState(ChatfoldError, ValueError):
    """Saved memory state could not be read (a wrong version, a bad field)."""


class SummarizerError(ChatfoldError):
    """A summarizer that is not a Python callable failed (an HTTP summarizer),
    or a summarizer returned an empty summary."""


class BudgetUnreachable(ChatfoldError):
    """In strict mode: the system messages, the latest turn and a minimal
    summary do not fit in ``budget``; the result needs ``required`` tokens."""

    budget: int = 0
    required: int = 0
