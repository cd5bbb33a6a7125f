"""sawtooth-memory's ``embeddings`` (for L3 semantic storage): not supported
by chatfold; the names import and raise
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError` when used."""

from .base import EmbeddingProvider
from .factory import create_embedding_provider
from .hash import HashEmbeddingProvider
from .openai import OpenAIEmbeddingProvider

__all__ = ["EmbeddingProvider", "HashEmbeddingProvider", "OpenAIEmbeddingProvider", "create_embedding_provider"]
