"""sawtooth-memory's PostgreSQL storage backend, over ``asyncpg`` (an
optional dependency: ``pip install asyncpg``).

A session's whole :class:`~..state.MemoryState` (chatfold's state
included) is one JSONB row of ``sawtooth_sessions``, and a multi-agent
pool's ledger and archive one row of ``sawtooth_pools``: sawtooth-memory
0.3.0's tables, columns and SQL, so a database it wrote is read here (its
session states load as in :meth:`~..state.MemoryState.model_validate`) and
the other way round. The tables are created on first use (``CREATE TABLE IF
NOT EXISTS``, under a transaction-level advisory lock, so processes that
start together do not race); a save is one atomic ``INSERT ... ON CONFLICT
DO UPDATE``.

What differs from sawtooth-memory, and why:

* L3 is not done, by design: chatfold has no semantic vector tier.
  ``upsert_vector_chunks_batch``, ``upsert_vector_chunk``,
  ``search_similar`` and ``count_vector_chunks`` raise
  :class:`~..exceptions.NotSupportedError`, and the bootstrap creates
  neither the ``vector`` extension nor ``sawtooth_semantic_vectors`` and
  its HNSW index (so no pgvector is needed). ``embedding_dimension`` is
  kept for the signature and not used.
* The connection pool lives on an event loop of the adapter's own, in a
  daemon thread started on first use (:class:`~.base.ClientOnOwnLoop`):
  an asyncpg pool is bound to one loop, and the sync manager runs every
  storage call on a fresh one (``asyncio.run``); one pool on one loop
  serves them all and leaks no connections. ``close()`` closes the pool
  and stops the thread (a later call starts them again); sawtooth makes the
  pool on the caller's loop.
* sawtooth locks the row (``SELECT ... FOR UPDATE``) before the upsert; the
  upsert alone is atomic, so the lock is left out.
* Without asyncpg the constructor raises ``ImportError`` naming the
  package (sawtooth fails on first use).
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Sequence, Tuple

from ..exceptions import NotSupportedError
from ..state import ArchivalMemory, EntityLedger, MemoryState
from .base import BaseStorageAdapter, ClientOnOwnLoop, dump_pool_state, load_pool_state_payload
from .semantic import SemanticChunkResult, SemanticStorageAdapter

_asyncpg: Any
try:
    import asyncpg as _asyncpg
except ImportError as error:  # asyncpg is optional
    _asyncpg = None
    _IMPORT_ERROR: Optional[ImportError] = error
else:
    _IMPORT_ERROR = None

__all__ = ["PostgresStorageAdapter"]

_L3 = "L3 semantic vector storage"
_L3_WHY = (
    "chatfold keeps no semantic vector tier (by design): its memory is the summary, the ledger and the recent turns"
)

# The advisory lock key every process bootstrapping the schema takes (any
# fixed number: "sawt0" in ASCII).
_SCHEMA_LOCK = 0x7361777430


_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS sawtooth_sessions (
        session_id VARCHAR(255) PRIMARY KEY,
        state_payload JSONB NOT NULL,
        created_at TIMESTAMPTZ DEFAULT NOW(),
        updated_at TIMESTAMPTZ DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS sawtooth_pools (
        pool_id VARCHAR(255) PRIMARY KEY,
        entities_payload JSONB NOT NULL,
        archive_payload JSONB NOT NULL,
        created_at TIMESTAMPTZ DEFAULT NOW(),
        updated_at TIMESTAMPTZ DEFAULT NOW()
    )
    """,
]

_LOAD = "SELECT state_payload FROM sawtooth_sessions WHERE session_id = $1"
_SAVE = """
    INSERT INTO sawtooth_sessions (session_id, state_payload, updated_at)
    VALUES ($1, $2::jsonb, NOW())
    ON CONFLICT (session_id)
    DO UPDATE SET state_payload = EXCLUDED.state_payload, updated_at = NOW()
"""
_DELETE = "DELETE FROM sawtooth_sessions WHERE session_id = $1"
_LOAD_POOL = "SELECT entities_payload, archive_payload FROM sawtooth_pools WHERE pool_id = $1"
_SAVE_POOL = """
    INSERT INTO sawtooth_pools (pool_id, entities_payload, archive_payload, updated_at)
    VALUES ($1, $2::jsonb, $3::jsonb, NOW())
    ON CONFLICT (pool_id)
    DO UPDATE SET
        entities_payload = EXCLUDED.entities_payload,
        archive_payload = EXCLUDED.archive_payload,
        updated_at = NOW()
"""


def _json(value: Any) -> Any:
    """A JSONB column's value as Python (asyncpg returns JSONB as text)."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    return json.loads(value) if isinstance(value, str) else value


class PostgresStorageAdapter(ClientOnOwnLoop, BaseStorageAdapter, SemanticStorageAdapter):
    """Sessions (and pools) in PostgreSQL as JSONB, through an asyncpg pool
    of ``min_pool_size`` to ``max_pool_size`` connections to ``dsn``. The
    L3 vector methods raise :class:`~..exceptions.NotSupportedError` (see
    the module's docs). Raises ``ImportError`` when asyncpg is not
    installed, ``ValueError`` for bad pool sizes."""

    def __init__(
        self,
        dsn: str,
        embedding_dimension: int = 1536,
        min_pool_size: int = 2,
        max_pool_size: int = 10,
    ) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise ValueError("dsn must be a non-empty PostgreSQL connection string")
        for name, value in [("min_pool_size", min_pool_size), ("max_pool_size", max_pool_size)]:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if max_pool_size < 1 or min_pool_size > max_pool_size:
            raise ValueError(
                f"the pool needs 0 <= min_pool_size <= max_pool_size and max_pool_size >= 1, "
                f"got {min_pool_size} and {max_pool_size}"
            )
        if _asyncpg is None:
            raise ImportError("Postgres support requires the asyncpg package: pip install asyncpg") from _IMPORT_ERROR
        self.dsn = dsn
        self.embedding_dimension = embedding_dimension
        self.min_pool_size = min_pool_size
        self.max_pool_size = max_pool_size
        super().__init__()

    # -- the pool, on the adapter's own loop (see ClientOnOwnLoop) ----------

    _thread_name = "chatfold-postgres"

    async def _open_client(self) -> Any:
        """The asyncpg pool, the schema bootstrapped on it."""
        pool = await _asyncpg.create_pool(self.dsn, min_size=self.min_pool_size, max_size=self.max_pool_size)
        try:
            async with pool.acquire() as conn:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
                    for statement in _SCHEMA:
                        await conn.execute(statement)
        except BaseException:
            await pool.close()
            raise
        return pool

    @staticmethod
    async def _close_client(client: Any) -> None:
        """Closes the asyncpg pool."""
        await client.close()

    # -- sessions -----------------------------------------------------------

    async def load_state(self, session_id: str) -> Optional[MemoryState]:
        """The session's state (``None``: no such session); ``ValueError``
        when the stored payload is not a state."""

        async def load(pool: Any) -> Any:
            return await pool.fetchval(_LOAD, session_id)

        raw = await self._with_client(load)
        if raw is None:
            return None
        return MemoryState.model_validate(_json(raw))

    async def save_state(self, session_id: str, state: MemoryState) -> None:
        """Writes the whole state (one atomic upsert)."""
        payload = MemoryState.model_validate(state).model_dump_json()

        async def save(pool: Any) -> None:
            await pool.execute(_SAVE, session_id, payload)

        await self._with_client(save)

    async def delete_state(self, session_id: str) -> None:
        """Forgets the session (nothing happens when there is none)."""

        async def delete(pool: Any) -> None:
            await pool.execute(_DELETE, session_id)

        await self._with_client(delete)

    # -- multi-agent pools --------------------------------------------------

    async def load_pool_state(self, pool_id: str) -> Optional[Tuple[EntityLedger, ArchivalMemory]]:
        """A pool's shared ledger and archive (``None``: no such pool)."""

        async def load(pool: Any) -> Any:
            return await pool.fetchrow(_LOAD_POOL, pool_id)

        row = await self._with_client(load)
        if row is None:
            return None
        return load_pool_state_payload(_json(row["entities_payload"]), _json(row["archive_payload"]))

    async def save_pool_state(self, pool_id: str, entities: EntityLedger, archive: ArchivalMemory) -> None:
        """Writes a pool's shared ledger and archive (one atomic upsert)."""
        ledger, narrative = dump_pool_state(entities, archive)
        ledger_json, narrative_json = json.dumps(ledger, ensure_ascii=False), json.dumps(narrative, ensure_ascii=False)

        async def save(pool: Any) -> None:
            await pool.execute(_SAVE_POOL, pool_id, ledger_json, narrative_json)

        await self._with_client(save)

    # -- L3: not done, by design ---------------------------------------------

    async def upsert_vector_chunks_batch(self, session_id: str, chunks: Sequence[Tuple[str, List[float]]]) -> int:
        """Not supported: chatfold has no L3 tier (raises NotSupportedError)."""
        raise NotSupportedError(_L3, _L3_WHY)

    async def upsert_vector_chunk(self, session_id: str, text: str, embedding: List[float]) -> None:
        """Not supported: chatfold has no L3 tier (raises NotSupportedError)."""
        raise NotSupportedError(_L3, _L3_WHY)

    async def search_similar(
        self, session_id: str, query_embedding: List[float], top_k: int = 5
    ) -> List[SemanticChunkResult]:
        """Not supported: chatfold has no L3 tier (raises NotSupportedError)."""
        raise NotSupportedError(_L3, _L3_WHY)

    async def count_vector_chunks(self, session_id: str) -> int:
        """Not supported: chatfold has no L3 tier (raises NotSupportedError)."""
        raise NotSupportedError(_L3, _L3_WHY)
