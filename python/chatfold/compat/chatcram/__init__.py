"""A drop-in for chatcram 0.1.0: ``import chatfold.compat.chatcram as chatcram``.

The same names, signatures and results as chatcram (``Compactor(budget,
summarize, *, keep_recent, tokenizer, summary_role, summary_prefix)``,
``compact(messages) -> CompactionResult``, the tokenizers), with the work
done in Rust by chatfold, and ``tiktoken_tokenizer`` counted in Rust.

chatcram's defect is fixed: its summaries are system messages, so each one
is kept forever and a history compacted again and again grows past the
budget. Here a previous summary is recognised and folded into the next
(the summarizer's transcript starts with it), so there is always at most one.
Also, unlike chatcram: the kept turns do not open on an assistant turn or
a tool result when a later user turn can open them; a tool call is never
kept without its results; and system messages among the kept turns stay
where they are.

As chatcram's, the budget only decides whether to compact: over it,
``keep_recent`` alone sets what stays verbatim, the rest is folded even when
the summary saves nothing, and ``summary_role`` may be any role.
``Compactor(..., strict=True)`` gives chatfold's behaviour instead: the
result stays within the budget whenever that is reachable (fewer recent
turns are kept when the summary would not fit), a history that no summary
makes smaller stays whole, and a response's role (``assistant``, ``tool``)
is refused for the summary.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .compactor import CompactionResult, Compactor, Message
from .tokenizers import CallableTokenizer, HeuristicTokenizer, Tokenizer, tiktoken_tokenizer

__version__ = "0.1.0"

__all__ = [
    "Compactor",
    "CompactionResult",
    "Message",
    "Tokenizer",
    "HeuristicTokenizer",
    "CallableTokenizer",
    "tiktoken_tokenizer",
    "__version__",
]
