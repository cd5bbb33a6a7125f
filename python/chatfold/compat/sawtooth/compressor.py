"""sawtooth-memory's async compressors, :class:`OllamaCompressor` and
:class:`CloudCompressor`, over chatfold's HTTP summarizers.

``await compressor.compress(messages_text)`` prunes the text (base64 runs,
tracebacks, hex dumps, as sawtooth does), folds it once through chatfold's
fold (a :class:`chatfold.AsyncSummaryMemory`) with chatfold's HTTP
summarizer for the config (:func:`.providers.factory.summarizer_for`, Rust,
run off the event loop), and returns sawtooth's result shape::

    {"narrative_summary": str, "extracted_entities": {str: str}}
    # CloudCompressor adds "total_tokens": int

One HTTP path serves every backend: Ollama and Gemini through their
OpenAI-compatible endpoints, OpenAI and Anthropic at the endpoint sawtooth's
adapter names. The sync compressors (:mod:`.sync_compressor`) share this
module's logic.

What differs from sawtooth-memory 0.3.0, and why (chatfold's HTTP
summarizers send chatfold's summary prompt and return plain text, so
sawtooth's JSON-mode exchange cannot come from them, and a second HTTP
client in Python is not written for it):

* ``narrative_summary`` is the model's plain-text summary (chatfold's
  prompt, not sawtooth's JSON-mode one); no JSON is parsed.
* ``extracted_entities`` is chatfold's ledger of the text: the exact
  identifiers (paths, URLs, IDs, numbers with units ...) found in it
  deterministically, kept verbatim; a ``key: value`` entry maps ``key`` to
  ``value``, a bare identifier maps to itself. The model does not name
  them. ``protected_entities`` are added under their keys, so each is in
  the result verbatim, as sawtooth's contract requires.
* ``total_tokens`` (cloud) is chatfold's count (``o200k_base``) of the
  pruned text and the summary: the provider's own usage figure is not
  exposed by chatfold's summarizers, and the prompt's overhead is not in it.
* Retries: chatfold's summarizer retries 429, 408, 5xx answers, time-outs
  and connection failures with exponential backoff (and honours
  ``Retry-After``), up to sawtooth's five attempts for a cloud provider and
  none for Ollama; sawtooth retries 429 alone. A 429 that outlasts the
  retries raises :class:`~.exceptions.CompressionError`, not
  ``httpx.HTTPStatusError`` (chatfold does not use httpx).
* There is no ``httpx`` client: ``close()`` has nothing to close (it is
  kept, and may be called any number of times), and the private
  ``_get_client`` does not exist, so tests that patch it do not apply.
* ``OllamaCompressor.ping()`` asks ``GET /api/tags`` with the standard
  library (a reachability probe; no summary goes through it) and raises
  :class:`~.exceptions.OllamaConnectionError` when Ollama cannot be
  reached, :class:`~.exceptions.CompressionError` for an HTTP error status,
  instead of httpx's exceptions.
"""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
from typing import Any, Dict, Mapping, Optional, Union

from ... import _chatfold
from ...errors import SummarizerError
from ...memory import AsyncSummaryMemory, SummaryMemory
from .state import ledger_map, split_summary
from .compression_utils import prune_compression_input
from .config import CloudConfig, OllamaConfig, Provider
from .exceptions import CompressionError, MalformedOutputError, OllamaConnectionError
from .providers.factory import summarizer_endpoint, summarizer_for

__all__ = ["CloudCompressor", "OllamaCompressor"]

# The longest summary a compression asks for (sawtooth's Anthropic max_tokens).
MAX_SUMMARY_TOKENS = 2048
# The tokenizer total_tokens is counted with.
COUNT_TOKENIZER = "o200k_base"
# How long ping() waits for Ollama (sawtooth's).
PING_TIMEOUT_SECONDS = 5.0

# sawtooth's module-level name for the pruning (private there too; kept so
# code importing it keeps working).
_prune = prune_compression_input

# The kinds in chatfold's HTTP summarizer errors ("<provider>: <kind>: ...").
_STATUS = re.compile(r": HTTP (\d{3}): (.*)", re.DOTALL)
_MALFORMED = ("invalid answer:", "the model refused:", "empty summary", "has no choices", "has no text")


def _entities(summary: str, protected: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """chatfold's ledger in ``summary`` as ``{key: latest value}``, with
    ``protected`` added under its own keys."""
    _, entries = split_summary(summary)
    entities = {key: values[-1] for key, values in ledger_map(entries).items() if values}
    if protected:
        entities.update({str(k): str(v) for k, v in protected.items()})
    return entities


class _Compression:
    """What the four compressors share: the config's summarizer, the input's
    pruning, the result's shape, and the errors' translation."""

    _kind = "compressor"

    def __init__(self, config: Union[OllamaConfig, CloudConfig]) -> None:
        self._config = config
        self._endpoint = summarizer_endpoint(config)
        self._summarizer = summarizer_for(config)

    @property
    def _ollama(self) -> bool:
        return isinstance(self._config, OllamaConfig)

    @staticmethod
    def _prepare(messages_text: str, protected_entities: Optional[Mapping[str, str]]) -> str:
        """The pruned text; ``TypeError`` for a bad argument."""
        if not isinstance(messages_text, str):
            raise TypeError(f"messages_text must be a string, got {type(messages_text).__name__}")
        if protected_entities is not None and not isinstance(protected_entities, Mapping):
            raise TypeError(f"protected_entities must be a mapping, got {type(protected_entities).__name__}")
        return prune_compression_input(messages_text)

    def _result(self, pruned: str, summary: str, protected: Optional[Mapping[str, str]]) -> Dict[str, Any]:
        """sawtooth's result shape for a fold of ``pruned`` into ``summary``."""
        narrative, _ = split_summary(summary)
        result: Dict[str, Any] = {
            "narrative_summary": narrative,
            "extracted_entities": _entities(summary, protected),
        }
        if not self._ollama:
            count = _chatfold.count_text
            result["total_tokens"] = count(pruned, COUNT_TOKENIZER) + count(narrative, COUNT_TOKENIZER)
        return result

    def _translate(self, error: SummarizerError) -> CompressionError:
        """sawtooth's exception for a failure of chatfold's summarizer."""
        message = str(error)
        timeout = self._config.timeout_seconds
        if ": connection failed:" in message:
            if self._ollama:
                return OllamaConnectionError(
                    f"Cannot reach Ollama at {self._config.base_url}. Is Ollama running? (`ollama serve`) ({message})"
                )
            return CompressionError(
                f"{self._kind}: cannot reach {self._endpoint}. Check your network or CloudConfig.base_url. ({message})"
            )
        if ": timed out:" in message:
            if self._ollama:
                return CompressionError(
                    f"Ollama timed out after {timeout}s. Try a smaller model or increase timeout_seconds. ({message})"
                )
            return CompressionError(f"{self._kind}: request timed out after {timeout}s. ({message})")
        status = _STATUS.search(message)
        if status:
            who = "Ollama" if self._ollama else f"{self._kind}: provider"
            return CompressionError(f"{who} returned HTTP {status.group(1)}: {status.group(2)[:400]}")
        if any(mark in message for mark in _MALFORMED):
            return MalformedOutputError(f"{self._kind}: {message}")
        return CompressionError(f"{self._kind}: {message}")

    def _check_key(self) -> None:
        """``ValueError`` when a cloud config has no API key (sawtooth's ``ping``)."""
        config = self._config
        assert isinstance(config, CloudConfig)
        key = config.api_key.get_secret_value() if hasattr(config.api_key, "get_secret_value") else config.api_key
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"{Provider(config.provider).value} API key is empty or missing.")

    def _probe_ollama(self) -> None:
        """``GET {base_url}/api/tags`` (blocking): Ollama's reachability check."""
        assert isinstance(self._config, OllamaConfig)
        url = self._config.base_url.rstrip("/") + "/api/tags"
        try:
            with urllib.request.urlopen(url, timeout=PING_TIMEOUT_SECONDS) as answer:
                answer.read()
        except urllib.error.HTTPError as error:
            raise CompressionError(f"Ollama returned HTTP {error.code} for {url}") from error
        except (urllib.error.URLError, OSError) as error:
            raise OllamaConnectionError(
                f"Cannot reach Ollama at {self._config.base_url}. Is Ollama running? (`ollama serve`) ({error})"
            ) from error

    def _fold_sync(self, messages_text: str, protected_entities: Optional[Mapping[str, str]]) -> Dict[str, Any]:
        """One blocking compression (the sync compressors' ``compress``)."""
        pruned = self._prepare(messages_text, protected_entities)
        memory = SummaryMemory(self._summarizer, max_summary_tokens=MAX_SUMMARY_TOKENS)
        try:
            memory.add_user(pruned)
        except SummarizerError as error:
            raise self._translate(error) from error
        return self._result(pruned, memory.summary, protected_entities)

    async def _fold_async(
        self, messages_text: str, protected_entities: Optional[Mapping[str, str]]
    ) -> Dict[str, Any]:
        """One compression, the HTTP exchange off the event loop."""
        pruned = self._prepare(messages_text, protected_entities)
        memory = AsyncSummaryMemory(self._summarizer, max_summary_tokens=MAX_SUMMARY_TOKENS)
        try:
            await memory.add_user(pruned)
        except SummarizerError as error:
            raise self._translate(error) from error
        return self._result(pruned, memory.summary, protected_entities)


class OllamaCompressor(_Compression):
    """Async compression through a local Ollama (its OpenAI-compatible API
    at ``{base_url}/v1``), no retries (as sawtooth). ``compress`` returns
    ``{"narrative_summary", "extracted_entities"}``; see the module's docs."""

    _kind = "OllamaCompressor"

    def __init__(self, config: OllamaConfig) -> None:
        if not isinstance(config, OllamaConfig):
            raise TypeError(f"OllamaCompressor needs an OllamaConfig, got {type(config).__name__}")
        super().__init__(config)

    async def close(self) -> None:
        """Nothing to close (chatfold's summarizer holds no connection between calls)."""

    async def ping(self) -> None:
        """Checks that Ollama answers ``GET /api/tags``: raises
        :class:`~.exceptions.OllamaConnectionError` when it cannot be
        reached, :class:`~.exceptions.CompressionError` for an error status."""
        await asyncio.get_running_loop().run_in_executor(None, self._probe_ollama)

    async def compress(
        self, messages_text: str, *, protected_entities: Optional[Dict[str, str]] = None
    ) -> Dict[str, Any]:
        """Prunes ``messages_text`` and folds it through Ollama.

        Raises :class:`~.exceptions.OllamaConnectionError` when Ollama cannot
        be reached, :class:`~.exceptions.CompressionError` on an HTTP error or
        a time-out, :class:`~.exceptions.MalformedOutputError` when the
        answer has no usable summary, ``TypeError`` for bad arguments.
        """
        return await self._fold_async(messages_text, protected_entities)


class CloudCompressor(_Compression):
    """Async compression through a cloud provider (OpenAI, Anthropic,
    Gemini), ``CloudConfig.base_url`` routing through a proxy. ``compress``
    returns ``{"narrative_summary", "extracted_entities", "total_tokens"}``;
    see the module's docs."""

    _kind = "CloudCompressor"

    def __init__(self, config: CloudConfig) -> None:
        if not isinstance(config, CloudConfig):
            raise TypeError(f"CloudCompressor needs a CloudConfig, got {type(config).__name__}")
        super().__init__(config)

    async def close(self) -> None:
        """Nothing to close (chatfold's summarizer holds no connection between calls)."""

    async def ping(self) -> None:
        """Checks that an API key is configured (``ValueError`` when empty); no request is made."""
        self._check_key()

    async def compress(
        self, messages_text: str, *, protected_entities: Optional[Dict[str, str]] = None
    ) -> Dict[str, Any]:
        """Prunes ``messages_text`` and folds it through the provider.

        Raises :class:`~.exceptions.CompressionError` on a connection
        failure, an HTTP error (after the retries) or a time-out,
        :class:`~.exceptions.MalformedOutputError` when the answer has no
        usable summary, ``TypeError`` for bad arguments.
        """
        return await self._fold_async(messages_text, protected_entities)
