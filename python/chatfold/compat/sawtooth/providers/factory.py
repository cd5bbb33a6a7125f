"""sawtooth-memory's ``providers.factory``: the adapter for a
:class:`~..config.CloudConfig`, and (chatfold's addition) the HTTP
summarizer of chatfold's that serves an ``OllamaConfig`` or a ``CloudConfig``.

:func:`get_adapter` is sawtooth-memory 0.3.0's. :func:`summarizer_for` is
how the compressors (:mod:`..compressor`, :mod:`..sync_compressor`) reach a
provider: one of chatfold's HTTP summarizers, which run in Rust. OpenAI and
Anthropic are called at the endpoint sawtooth's adapter names (a
``base_url`` proxy included); Ollama and Gemini through the
OpenAI-compatible endpoint each serves (``{base_url}/v1/chat/completions``
and ``{base}/v1beta/openai/chat/completions``), since chatfold speaks no
native Ollama or Gemini API. So a Gemini ``base_url`` must be a proxy that
serves Google's OpenAI-compatible path, and Gemini is authenticated with
``Authorization: Bearer`` rather than ``x-goog-api-key``.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from .... import _chatfold
from ..config import CloudConfig, OllamaConfig, Provider
from .adapters import AnthropicAdapter, GeminiAdapter, OpenAIAdapter, ProviderAdapter

__all__ = ["get_adapter", "summarizer_endpoint", "summarizer_for"]

# sawtooth retries a cloud call on HTTP 429 with at most five attempts, and
# never retries Ollama: the same counts for chatfold's summarizers.
CLOUD_RETRIES = 4
OLLAMA_RETRIES = 0

GEMINI_OPENAI_PATH = "/v1beta/openai/chat/completions"
OLLAMA_OPENAI_PATH = "/v1/chat/completions"


def _provider(config: Any) -> Provider:
    """``config.provider`` as a :class:`Provider`; ``ValueError`` for an unknown one."""
    try:
        return Provider(config.provider)
    except ValueError:
        raise ValueError(
            f"Unsupported provider: {config.provider!r}. Valid choices: {[p.value for p in Provider]}"
        ) from None


def get_adapter(config: CloudConfig) -> ProviderAdapter:
    """The adapter for ``config.provider`` (with ``config.base_url``; Gemini's
    with ``config.model``). Raises ``ValueError`` for an unknown provider."""
    provider = _provider(config)
    if provider is Provider.OPENAI:
        return OpenAIAdapter(base_url=config.base_url)
    if provider is Provider.ANTHROPIC:
        return AnthropicAdapter(base_url=config.base_url)
    return GeminiAdapter(model=config.model, base_url=config.base_url)


def summarizer_endpoint(config: Union[CloudConfig, OllamaConfig]) -> str:
    """The URL chatfold's summarizer posts to for ``config`` (see the module's docs)."""
    if isinstance(config, OllamaConfig):
        return config.base_url.rstrip("/") + OLLAMA_OPENAI_PATH
    if not isinstance(config, CloudConfig):
        raise TypeError(f"expected an OllamaConfig or a CloudConfig, got {type(config).__name__}")
    provider = _provider(config)
    if provider is Provider.GEMINI:
        return (config.base_url or GeminiAdapter.DEFAULT_BASE).rstrip("/") + GEMINI_OPENAI_PATH
    return get_adapter(config).endpoint


def summarizer_for(config: Union[CloudConfig, OllamaConfig], *, retries: Optional[int] = None) -> Any:
    """chatfold's HTTP summarizer for ``config``: an
    :class:`chatfold.AnthropicSummarizer` for Anthropic, an
    :class:`chatfold.OpenAISummarizer` for OpenAI, Gemini and Ollama, at
    :func:`summarizer_endpoint`, with the config's key and
    ``timeout_seconds``. ``retries`` defaults to sawtooth's (4 for a cloud
    provider, 0 for Ollama); chatfold retries 429, 408, 5xx answers,
    time-outs and connection failures. An empty API key sends none (the
    provider then answers 401). Raises ``TypeError`` for another kind of
    config."""
    url = summarizer_endpoint(config)
    timeout = float(config.timeout_seconds)
    if isinstance(config, OllamaConfig):
        tries = OLLAMA_RETRIES if retries is None else retries
        return _chatfold.OpenAISummarizer(url, config.model, timeout=timeout, retries=tries)
    key = config.api_key.get_secret_value() if hasattr(config.api_key, "get_secret_value") else config.api_key
    tries = CLOUD_RETRIES if retries is None else retries
    make = _chatfold.AnthropicSummarizer if _provider(config) is Provider.ANTHROPIC else _chatfold.OpenAISummarizer
    return make(url, config.model, api_key=key or None, timeout=timeout, retries=tries)
