"""sawtooth-memory's ``providers.adapters``: not supported by chatfold.

Sawtooth's provider adapters (chatfold's OpenAI-compatible and Anthropic summarizers run in Rust). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from .._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's provider adapters (chatfold's OpenAI-compatible and Anthropic summarizers run in Rust)"

__all__ = ["ProviderAdapter", "OpenAIAdapter", "AnthropicAdapter", "GeminiAdapter"]

ProviderAdapter = unsupported_class(__name__, "ProviderAdapter", _FEATURE)
OpenAIAdapter = unsupported_class(__name__, "OpenAIAdapter", _FEATURE)
AnthropicAdapter = unsupported_class(__name__, "AnthropicAdapter", _FEATURE)
GeminiAdapter = unsupported_class(__name__, "GeminiAdapter", _FEATURE)
