"""sawtooth-memory's ``embeddings.hash``: not supported by chatfold.

Embeddings for L3 semantic storage. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from .._unsupported import unsupported_class, unsupported_function

_FEATURE = "embeddings for L3 semantic storage"

__all__ = ["HashEmbeddingProvider"]

HashEmbeddingProvider = unsupported_class(__name__, "HashEmbeddingProvider", _FEATURE)
