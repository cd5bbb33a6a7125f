"""sawtooth-memory's Redis storage backend, over ``redis.asyncio`` (the
``redis`` package, as sawtooth uses it).

The same constructor, keys (``{key_prefix}{session_id}:l1``,
``sawtooth:pool:{pool_id}:shared``) and commands (``SETEX`` with a TTL,
``SET`` without one, ``GET``, ``DEL``). sawtooth's defect is fixed: it saves
only L0, L1 and L3's counts, so a reloaded session has lost its summary and
its ledger; this adapter saves the whole state (chatfold's included). A
session saved by sawtooth-memory loads too (its L1 and L0).

What else differs, and why: the connection pool lives on an event loop of
the adapter's own, in a daemon thread made on first use
(:class:`~.base.ClientOnOwnLoop`); sawtooth makes it in the constructor,
bound to the first loop it runs on, while the sync manager runs every
storage call on a fresh loop (``asyncio.run``). ``close()`` closes it and
stops the thread (a later call starts them again).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Tuple

from ..state import ArchivalMemory, EntityLedger, MemoryState
from .base import BaseStorageAdapter, ClientOnOwnLoop, dump_pool_state, load_pool_state_payload

_redis: Any
try:
    import redis.asyncio as _redis
except ImportError as error:  # the redis package is optional
    _redis = None
    _IMPORT_ERROR: Optional[ImportError] = error
else:
    _IMPORT_ERROR = None

__all__ = ["RedisStorageAdapter"]


class RedisStorageAdapter(ClientOnOwnLoop, BaseStorageAdapter):
    """Sessions in Redis as JSON, with an optional TTL (default one day).
    Raises ``ImportError`` when the ``redis`` package is not installed."""

    def __init__(
        self,
        redis_url: str = "redis://localhost:6379/0",
        key_prefix: str = "sawtooth:session:",
        ttl_seconds: Optional[int] = 86400,
    ) -> None:
        self.redis_url = redis_url
        self.key_prefix = key_prefix
        self.ttl_seconds = ttl_seconds
        bad_ttl = isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or ttl_seconds < 0
        if ttl_seconds is not None and bad_ttl:
            raise ValueError(f"ttl_seconds must be None or a non-negative integer, got {ttl_seconds!r}")
        if _redis is None:
            raise ImportError("Redis support requires the redis package: pip install redis") from _IMPORT_ERROR
        super().__init__()

    # -- the client, on the adapter's own loop (see ClientOnOwnLoop) --------

    _thread_name = "chatfold-redis"

    async def _open_client(self) -> Any:
        """A ``redis.asyncio`` client (its connection pool) for ``redis_url``."""
        return _redis.from_url(self.redis_url, decode_responses=True)

    @staticmethod
    async def _close_client(client: Any) -> None:
        """Closes the client and its connection pool."""
        await client.aclose()

    def _get_key(self, session_id: str) -> str:
        return f"{self.key_prefix}{session_id}:l1"

    @staticmethod
    def _get_pool_key(pool_id: str) -> str:
        return f"sawtooth:pool:{pool_id}:shared"

    async def _command(self, name: str, *args: Any) -> Any:
        """The answer to the Redis command ``client.<name>(*args)``, run on the adapter's loop."""

        async def run(client: Any) -> Any:
            return await getattr(client, name)(*args)

        return await self._with_client(run)

    async def _put(self, key: str, payload: str) -> None:
        """Writes ``payload`` under ``key``: ``SETEX`` with the TTL, ``SET`` without one."""
        if self.ttl_seconds:
            await self._command("setex", key, self.ttl_seconds, payload)
        else:
            await self._command("set", key, payload)

    async def load_state(self, session_id: str) -> Optional[MemoryState]:
        """The session's state, ``None`` when Redis has none; ``ValueError``
        when the stored value is not a state."""
        raw = await self._command("get", self._get_key(session_id))
        if not raw:
            return None
        return MemoryState.model_validate_json(raw)

    async def save_state(self, session_id: str, state: MemoryState) -> None:
        """Writes the whole state (with the TTL)."""
        await self._put(self._get_key(session_id), MemoryState.model_validate(state).model_dump_json())

    async def delete_state(self, session_id: str) -> None:
        """Forgets the session."""
        await self._command("delete", self._get_key(session_id))

    async def load_pool_state(self, pool_id: str) -> Optional[Tuple[EntityLedger, ArchivalMemory]]:
        """A pool's shared ledger and archive (``None``: no such pool);
        ``ValueError`` when the stored value is not a pool state."""
        raw = await self._command("get", self._get_pool_key(pool_id))
        if not raw:
            return None
        try:
            payload: Any = json.loads(raw)
        except ValueError as error:
            raise ValueError(f"not a pool state: {error}") from None
        if not isinstance(payload, dict):
            raise ValueError("not a pool state: not a JSON object")
        return load_pool_state_payload(payload.get("l1_5_entities") or {}, payload.get("l2_archival") or {})

    async def save_pool_state(self, pool_id: str, entities: EntityLedger, archive: ArchivalMemory) -> None:
        """Writes a pool's shared ledger and archive (with the TTL)."""
        ledger, narrative = dump_pool_state(entities, archive)
        payload = {"l1_5_entities": ledger, "l2_archival": narrative}
        await self._put(self._get_pool_key(pool_id), json.dumps(payload, ensure_ascii=False))
