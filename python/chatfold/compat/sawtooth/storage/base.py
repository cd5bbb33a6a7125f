"""sawtooth-memory's storage contract: an async adapter that saves and
loads a session's :class:`~..state.MemoryState`. The managers load the
session on start and save it on stop, after ``build_prompt`` when it
changed, and after every add with ``persist_every_message``. The pool
methods are part of the contract; chatfold's managers never call them
(``pool_id`` is not supported)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional, Tuple

from ..state import ArchivalMemory, EntityLedger, MemoryState

__all__ = ["BaseStorageAdapter"]


class BaseStorageAdapter(ABC):
    """The persistence contract (every method async)."""

    @abstractmethod
    async def load_state(self, session_id: str) -> Optional[MemoryState]:
        """The session's state (``None``: no such session)."""

    @abstractmethod
    async def save_state(self, session_id: str, state: MemoryState) -> None:
        """Saves the session's whole state."""

    @abstractmethod
    async def delete_state(self, session_id: str) -> None:
        """Forgets the session."""

    @abstractmethod
    async def load_pool_state(self, pool_id: str) -> Optional[Tuple[EntityLedger, ArchivalMemory]]:
        """A multi-agent pool's shared L1.5 and L2 (``None``: no such pool)."""

    @abstractmethod
    async def save_pool_state(self, pool_id: str, entities: EntityLedger, archive: ArchivalMemory) -> None:
        """Saves a pool's shared L1.5 and L2."""
