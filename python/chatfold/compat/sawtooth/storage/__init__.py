"""sawtooth-memory's storage: the adapter contract, the Redis backend
(working), the Postgres + pgvector backend (not supported: it raises
:class:`~..exceptions.NotSupportedError`) and L3's result type. Without an
adapter the state lives in the process (the default)."""

from .base import BaseStorageAdapter
from .postgres_adapter import PostgresStorageAdapter
from .redis_adapter import RedisStorageAdapter
from .semantic import SemanticChunkResult

__all__ = ["BaseStorageAdapter", "RedisStorageAdapter", "PostgresStorageAdapter", "SemanticChunkResult"]
