"""sawtooth-memory's storage: the adapter contract
(:class:`BaseStorageAdapter`), the Redis backend (``redis``), the
PostgreSQL backend (``asyncpg``; sessions and pools, without L3's vector
methods, which raise :class:`~..exceptions.NotSupportedError`: chatfold has
no L3 tier by design) and L3's result type. Without an adapter the state
lives in the process (the default). Each backend's module says what differs
from sawtooth-memory 0.3.0.
"""

from .base import BaseStorageAdapter
from .postgres_adapter import PostgresStorageAdapter
from .redis_adapter import RedisStorageAdapter
from .semantic import SemanticChunkResult

__all__ = ["BaseStorageAdapter", "RedisStorageAdapter", "PostgresStorageAdapter", "SemanticChunkResult"]
