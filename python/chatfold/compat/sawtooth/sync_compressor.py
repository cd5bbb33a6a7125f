"""sawtooth-memory's sync compressors, :class:`SyncOllamaCompressor` and
:class:`SyncCloudCompressor`: the async ones of :mod:`.compressor`, blocking.

``compressor.compress(messages_text)`` prunes the text and folds it once
through chatfold's fold (a :class:`chatfold.SummaryMemory`) with chatfold's
HTTP summarizer for the config (Rust, the GIL released while it waits).
The result's shape, the errors, and what differs from sawtooth-memory
0.3.0 (a plain-text narrative, chatfold's ledger as the entities, the
counted ``total_tokens``, the retries, no httpx client and so no
``_get_client``) are as in :mod:`.compressor`, whose docs say why.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .compressor import _Compression
from .config import CloudConfig, OllamaConfig, Provider

__all__ = ["SyncCloudCompressor", "SyncOllamaCompressor"]


class SyncOllamaCompressor(_Compression):
    """Blocking compression through a local Ollama (its OpenAI-compatible
    API at ``{base_url}/v1``), no retries (as sawtooth). ``compress``
    returns ``{"narrative_summary", "extracted_entities"}``."""

    _kind = "SyncOllamaCompressor"

    def __init__(self, config: OllamaConfig) -> None:
        if not isinstance(config, OllamaConfig):
            raise TypeError(f"SyncOllamaCompressor needs an OllamaConfig, got {type(config).__name__}")
        super().__init__(config)

    @property
    def model(self) -> str:
        """The Ollama model."""
        return self._config.model

    def close(self) -> None:
        """Nothing to close (chatfold's summarizer holds no connection between calls)."""

    def ping(self) -> None:
        """Checks that Ollama answers ``GET /api/tags``: raises
        :class:`~.exceptions.OllamaConnectionError` when it cannot be
        reached, :class:`~.exceptions.CompressionError` for an error status."""
        self._probe_ollama()

    def compress(self, messages_text: str, *, protected_entities: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """Prunes ``messages_text`` and folds it through Ollama (blocking).

        Raises :class:`~.exceptions.OllamaConnectionError` when Ollama cannot
        be reached, :class:`~.exceptions.CompressionError` on an HTTP error or
        a time-out, :class:`~.exceptions.MalformedOutputError` when the
        answer has no usable summary, ``TypeError`` for bad arguments.
        """
        return self._fold_sync(messages_text, protected_entities)


class SyncCloudCompressor(_Compression):
    """Blocking compression through a cloud provider (OpenAI, Anthropic,
    Gemini). ``compress`` returns ``{"narrative_summary",
    "extracted_entities", "total_tokens"}``."""

    _kind = "SyncCloudCompressor"

    def __init__(self, config: CloudConfig) -> None:
        if not isinstance(config, CloudConfig):
            raise TypeError(f"SyncCloudCompressor needs a CloudConfig, got {type(config).__name__}")
        super().__init__(config)

    @property
    def provider(self) -> str:
        """The provider's name (``"openai"``, ``"anthropic"``, ``"gemini"``)."""
        return Provider(self._config.provider).value

    @property
    def model(self) -> str:
        """The provider's model."""
        return self._config.model

    def close(self) -> None:
        """Nothing to close (chatfold's summarizer holds no connection between calls)."""

    def ping(self) -> None:
        """Checks that an API key is configured (``ValueError`` when empty); no request is made."""
        self._check_key()

    def compress(self, messages_text: str, *, protected_entities: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """Prunes ``messages_text`` and folds it through the provider (blocking).

        Raises :class:`~.exceptions.CompressionError` on a connection
        failure, an HTTP error (after the retries) or a time-out,
        :class:`~.exceptions.MalformedOutputError` when the answer has no
        usable summary, ``TypeError`` for bad arguments.
        """
        return self._fold_sync(messages_text, protected_entities)
