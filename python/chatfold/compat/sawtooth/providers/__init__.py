"""sawtooth-memory's ``providers``: the cloud provider adapters (pure
payload builders and parsers for OpenAI, Anthropic and Gemini) and
:func:`get_adapter`, which picks one for a ``CloudConfig``.

chatfold's compressors call the providers through chatfold's HTTP
summarizers instead (:func:`.factory.summarizer_for`, chatfold's
addition); see :mod:`.adapters` and :mod:`.factory` for what differs.
"""

from .adapters import AnthropicAdapter, GeminiAdapter, OpenAIAdapter, ProviderAdapter
from .factory import get_adapter

__all__ = ["ProviderAdapter", "OpenAIAdapter", "AnthropicAdapter", "GeminiAdapter", "get_adapter"]
