"""sawtooth-memory's ``providers`` (its cloud adapters): not supported by
chatfold, whose OpenAI-compatible and Anthropic summarizers run in Rust
(configure them with ``ContextManagerConfig.cloud``); the names import and
raise :class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError` when used."""

from .adapters import AnthropicAdapter, GeminiAdapter, OpenAIAdapter, ProviderAdapter
from .factory import get_adapter

__all__ = ["ProviderAdapter", "OpenAIAdapter", "AnthropicAdapter", "GeminiAdapter", "get_adapter"]
