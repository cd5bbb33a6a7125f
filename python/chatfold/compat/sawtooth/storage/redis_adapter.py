"""sawtooth-memory's Redis storage backend, over ``redis.asyncio`` (the
``redis`` package, as sawtooth uses it).

The same constructor and keys (``{key_prefix}{session_id}:l1``,
``sawtooth:pool:{pool_id}:shared``). sawtooth's defect is fixed: it saves
only L0, L1 and L3's counts, so a reloaded session has lost its summary and
its ledger; this adapter saves the whole state (chatfold's included). A
session saved by sawtooth-memory loads too (its L1 and L0).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, Optional, Tuple

from ..state import ArchivalMemory, EntityLedger, MemoryState
from .base import BaseStorageAdapter

_redis: Any
try:
    import redis.asyncio as _redis
except ImportError as error:  # the redis package is optional
    _redis = None
    _IMPORT_ERROR: Optional[ImportError] = error
else:
    _IMPORT_ERROR = None

__all__ = ["RedisStorageAdapter"]


class RedisStorageAdapter(BaseStorageAdapter):
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
        if _redis is None:
            raise ImportError("Redis support requires the redis package: pip install redis") from _IMPORT_ERROR
        self._clients: Dict[int, Tuple[asyncio.AbstractEventLoop, Any]] = {}

    @property
    def _client(self) -> Any:
        """The connection pool of the running event loop: a pool is bound to
        one loop, and the sync manager runs each call on a fresh one."""
        loop = asyncio.get_running_loop()
        held = self._clients.get(id(loop))
        if held is not None and held[0] is loop:
            return held[1]
        for key, (old, _) in list(self._clients.items()):  # pools of closed loops
            if old.is_closed():
                del self._clients[key]
        client = _redis.from_url(self.redis_url, decode_responses=True)
        self._clients[id(loop)] = (loop, client)
        return client

    def _get_key(self, session_id: str) -> str:
        return f"{self.key_prefix}{session_id}:l1"

    @staticmethod
    def _get_pool_key(pool_id: str) -> str:
        return f"sawtooth:pool:{pool_id}:shared"

    async def _put(self, key: str, payload: str) -> None:
        await self._client.set(key, payload, ex=self.ttl_seconds or None)

    async def load_state(self, session_id: str) -> Optional[MemoryState]:
        """The session's state, ``None`` when Redis has none; ``ValueError``
        when the stored value is not a state."""
        raw = await self._client.get(self._get_key(session_id))
        if not raw:
            return None
        return MemoryState.model_validate_json(raw)

    async def save_state(self, session_id: str, state: MemoryState) -> None:
        """Writes the whole state (with the TTL)."""
        await self._put(self._get_key(session_id), MemoryState.model_validate(state).model_dump_json())

    async def delete_state(self, session_id: str) -> None:
        """Forgets the session."""
        await self._client.delete(self._get_key(session_id))

    async def load_pool_state(self, pool_id: str) -> Optional[Tuple[EntityLedger, ArchivalMemory]]:
        """A pool's shared ledger and archive (``None``: no such pool)."""
        raw = await self._client.get(self._get_pool_key(pool_id))
        if not raw:
            return None
        payload: Any = json.loads(raw)
        entities = (payload.get("l1_5_entities") or {}).get("entities") or {}
        archive = payload.get("l2_archival") or {}
        return (
            EntityLedger(entities={str(k): tuple(map(str, v)) for k, v in entities.items()}),
            ArchivalMemory(narrative=str(archive.get("narrative", "")), token_count=int(archive.get("token_count", 0))),
        )

    async def save_pool_state(self, pool_id: str, entities: EntityLedger, archive: ArchivalMemory) -> None:
        """Writes a pool's shared ledger and archive."""
        payload = {
            "l1_5_entities": {"entities": {k: list(v) for k, v in entities.entities.items()}},
            "l2_archival": {"narrative": archive.narrative, "token_count": archive.token_count},
        }
        await self._put(self._get_pool_key(pool_id), json.dumps(payload))

    async def close(self) -> None:
        """Closes the running loop's connection pool."""
        held = self._clients.pop(id(asyncio.get_running_loop()), None)
        if held is not None:
            await held[1].aclose()
