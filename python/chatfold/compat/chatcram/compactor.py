"""chatcram 0.1.0's compactor over chatfold's (``chatfold.compat.chatcram.compactor``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, List, Optional, TypedDict

from ... import _chatfold
from ...errors import SummarizerError
from .tokenizers import HeuristicTokenizer, Tokenizer


class Message(TypedDict):
    """A chat message: ``{"role": ..., "content": ...}``."""

    role: str
    content: str


@dataclass
class CompactionResult:
    """The outcome of :meth:`Compactor.compact`."""

    messages: list[Message]
    used_tokens: int
    summarized: bool
    summary: str | None = None


class Compactor:
    """Compact a chat history into a token budget by summarizing old turns.

    As chatcram's, with the fixes listed in ``chatfold.compat.chatcram``.
    """

    def __init__(
        self,
        budget: int,
        summarize: Callable[[str], str],
        *,
        keep_recent: int | None = None,
        tokenizer: Tokenizer | None = None,
        summary_role: str = "system",
        summary_prefix: str = "Summary of earlier conversation:\n",
        strict: bool = False,
    ) -> None:
        """Create a compactor (the arguments are chatcram's).

        As chatcram's, the budget only decides whether to compact: over it,
        ``keep_recent`` alone sets what stays verbatim and the rest is
        folded, even when the summary saves nothing, and ``summary_role``
        may be any role. ``strict=True`` gives chatfold's behaviour instead:
        fewer recent turns are kept when the summary would not fit, a
        history no summary makes smaller stays whole, and the summary is
        never a response's role (``assistant``, ``tool``).
        """
        if budget <= 0:
            raise ValueError("budget must be positive")
        self.budget = budget
        self.summarize = summarize
        self.keep_recent = budget // 2 if keep_recent is None else keep_recent
        if self.keep_recent < 0:
            raise ValueError("keep_recent must be non-negative")
        self.tokenizer: Tokenizer = tokenizer or HeuristicTokenizer()
        self.summary_role = summary_role
        self.summary_prefix = summary_prefix
        name = getattr(self.tokenizer, "_chatfold_name", lambda: None)()
        self._inner = _chatfold.Compactor(
            budget,
            min(self.keep_recent, budget),
            tokenizer=name if name is not None else self.tokenizer.count,
            counting="rendered",
            summary_role=summary_role,
            summary_prefix=summary_prefix,
            min_summary_tokens=1,
            ledger=False,
            budget_as_trigger=not strict,
            allow_response_role=not strict,
        )

    def _transcript(self, request: Any) -> str:
        # chatcram's transcript: one "role: content" line per folded message,
        # after the previous summary's line; written in Rust in one pass.
        first = None
        if request.previous_summary:
            first = f"{self.summary_role}: {self.summary_prefix}{request.previous_summary}"
        return request._rendered(first)

    def compact(self, messages: list[Message]) -> CompactionResult:
        """Return a compacted copy of ``messages`` that targets the budget."""
        # A new list of the caller's dicts, as chatcram returns them.
        msgs = messages if type(messages) is list else list(messages)
        summaries: List[str] = []

        def summarize(request: Any) -> str:
            text = self.summarize(self._transcript(request)).strip()
            summaries.append(text)
            return text

        try:
            result = self._inner.compact(msgs, summarize)
        except SummarizerError:
            if summaries and not summaries[-1]:
                # The summarizer gave nothing usable: the history untouched.
                return CompactionResult(list(msgs), used_tokens=self._inner.count(msgs), summarized=False)
            raise
        if not result.summarized:
            return CompactionResult(result.messages, used_tokens=result.tokens_after, summarized=False)
        out = result.messages
        summary = next(
            (m["content"][len(self.summary_prefix):] for m in out if _is_summary(m, self)),
            summaries[-1] if summaries else None,
        )
        return CompactionResult(out, used_tokens=result.tokens_after, summarized=True, summary=summary)


def _is_summary(m: Any, c: Compactor) -> bool:
    content = m.get("content")
    return m.get("role") == c.summary_role and isinstance(content, str) and content.startswith(c.summary_prefix)
