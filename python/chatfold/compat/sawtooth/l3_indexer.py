"""sawtooth-memory's ``l3_indexer``: not supported by chatfold.

L3 semantic indexing (needs an embeddings model and pgvector). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "L3 semantic indexing (needs an embeddings model and pgvector)"

__all__ = ["SemanticIndexer", "chunk_text"]

SemanticIndexer = unsupported_class(__name__, "SemanticIndexer", _FEATURE)
chunk_text = unsupported_function(__name__, "chunk_text", _FEATURE)
