"""chatcram 0.1.0's tokenizers (``chatfold.compat.chatcram.tokenizers``).

:func:`tiktoken_tokenizer` counts in Rust (chatfold's o200k_base and
cl100k_base), with no tiktoken needed; the compactor then counts without
calling back into Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Optional, Protocol, runtime_checkable

from ... import _chatfold


@runtime_checkable
class Tokenizer(Protocol):
    """Minimal interface the compactor needs: count tokens in a string."""

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


class HeuristicTokenizer:
    """Dependency-free token estimator based on characters-per-token."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        """Return ``ceil(len(text) / chars_per_token)``."""
        if not text:
            return 0
        return math.ceil(len(text) / self.chars_per_token)

    def _chatfold_name(self) -> Optional[str]:
        return "heuristic" if self.chars_per_token == 4.0 else None


class CallableTokenizer:
    """Adapt a plain ``count`` function (e.g. ``len(enc.encode(x))``)."""

    def __init__(self, count_fn: Callable[[str], int]) -> None:
        self._count = count_fn

    def count(self, text: str) -> int:
        """Return ``count_fn(text)``."""
        return self._count(text)


class _NamedTokenizer(CallableTokenizer):
    """A built-in tokenizer of chatfold's, counted in Rust."""

    def __init__(self, name: str) -> None:
        self._name = name
        super().__init__(lambda text: _chatfold.count_text(text, name))

    def _chatfold_name(self) -> Optional[str]:
        return self._name


def tiktoken_tokenizer(model: str = "gpt-4o") -> CallableTokenizer:
    """A tokenizer for ``model``'s encoding, counted in Rust (``cl100k_base``
    for models chatfold does not know, as chatcram falls back)."""
    try:
        _chatfold.count_text("", model)
        name = model
    except Exception:
        name = "cl100k_base"
    return _NamedTokenizer(name)
