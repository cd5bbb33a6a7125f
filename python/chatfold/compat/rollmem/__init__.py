"""A drop-in for rollmem 0.6.0: ``import chatfold.compat.rollmem as rollmem``.

The same names, signatures, defaults and saved state as rollmem, with the
work (counting, eviction, folding) done in Rust by chatfold. State saved by
rollmem loads here, and state saved here loads in rollmem.

As rollmem does, a summarizer that returns an empty or blank summary has
it stored, and the folded turns leave. ``strict=True`` (a keyword of each
memory that folds, and of its ``from_dict``) gives chatfold's behaviour
instead: such a summary raises :class:`chatfold.SummarizerError` and the
turns stay. The summary is stripped of leading and trailing whitespace.
In the async memories an add that finds a fold in flight keeps its turn
and returns without waiting for that fold (rollmem's adds queue on a lock);
the fold in flight folds it next if it is due, so nothing is lost and the
states agree once the adds are awaited in sequence. ``buffer`` and
``summary`` are properties: assigning them replaces the
state, but ``buffer`` is a copy, so mutate it by assigning a new list.
"""

from .memory import (
    AsyncRollingMemory,
    AsyncSummarizeFn,
    AsyncSummaryMemory,
    BufferMemory,
    RollingMemory,
    SummarizeFn,
    SummaryMemory,
    TokenCounter,
    WindowMemory,
)
from .message import ASSISTANT, SYSTEM, TOOL, USER, Message, ToolCall

__all__ = [
    "RollingMemory",
    "AsyncRollingMemory",
    "BufferMemory",
    "WindowMemory",
    "SummaryMemory",
    "AsyncSummaryMemory",
    "Message",
    "ToolCall",
    "SummarizeFn",
    "AsyncSummarizeFn",
    "TokenCounter",
    "USER",
    "ASSISTANT",
    "SYSTEM",
    "TOOL",
]

__version__ = "0.6.0"
