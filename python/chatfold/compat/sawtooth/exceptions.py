"""sawtooth-memory's exception hierarchy, plus :class:`NotSupportedError`.

::

    SawtoothError
    ├── CompressionError          # a compression (fold) failed
    │   ├── OllamaConnectionError # the Ollama backend cannot be reached
    │   └── MalformedOutputError  # the model's output could not be used
    ├── TokenLimitExceededError   # working memory at the hard limit, fallback_truncate=False
    └── NotSupportedError         # chatfold's addition: a sawtooth feature chatfold does not do
"""

from __future__ import annotations

from ...errors import ChatfoldError

__all__ = [
    "SawtoothError",
    "CompressionError",
    "OllamaConnectionError",
    "MalformedOutputError",
    "TokenLimitExceededError",
    "NotSupportedError",
]


class SawtoothError(Exception):
    """Base class for the sawtooth-memory errors."""


class CompressionError(SawtoothError):
    """A compression (a fold) failed."""


class OllamaConnectionError(CompressionError):
    """The Ollama backend cannot be reached."""


class MalformedOutputError(CompressionError):
    """The compression model's output could not be used."""


class TokenLimitExceededError(SawtoothError):
    """Working memory (L1) reached ``hard_limit_tokens`` and
    ``fallback_truncate`` is off. The message was stored first: nothing is
    lost, and ``build_prompt()`` still stays within the hard limit."""


class NotSupportedError(SawtoothError, ChatfoldError, NotImplementedError):
    """A sawtooth-memory feature that chatfold's compat module does not do
    (it needs an outside service or is not part of chatfold's model: L3
    vector storage, Postgres, embeddings, LangGraph / LangChain, the pool,
    the provider adapters). Raised when the feature is used, never silently
    ignored. ``feature`` names it.

    It is a :class:`SawtoothError`, a :class:`chatfold.ChatfoldError` and a
    :class:`NotImplementedError`, so any of the three catches it.
    """

    feature: str = ""

    def __init__(self, feature: str, detail: str = "") -> None:
        self.feature = feature
        message = f"{feature} is not supported by chatfold.compat.sawtooth"
        if detail:
            message += f": {detail}"
        super().__init__(message)
