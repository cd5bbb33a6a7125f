"""sawtooth-memory's ``embeddings.factory``: not supported by chatfold.

Embeddings for L3 semantic storage. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from .._unsupported import unsupported_class, unsupported_function

_FEATURE = "embeddings for L3 semantic storage"

__all__ = ["create_embedding_provider"]

create_embedding_provider = unsupported_function(__name__, "create_embedding_provider", _FEATURE)
