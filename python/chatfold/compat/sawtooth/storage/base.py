"""sawtooth-memory's storage contract: an async adapter that saves and
loads a session's :class:`~..state.MemoryState`. The managers load the
session on start and save it on stop, after ``build_prompt`` when it
changed, and after every add with ``persist_every_message``. The pool
methods are part of the contract; chatfold's managers never call them
(``pool_id`` is not supported).

What the Redis and Postgres adapters share is here too:
:class:`ClientOnOwnLoop`, which keeps their connection pool on an event
loop of the adapter's own (a pool is bound to the loop it first ran on,
and the sync manager runs every storage call on a fresh one with
``asyncio.run``), and the two pool-state helpers, a pool's ledger and
archive as JSON objects (sawtooth's shape) and back."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from abc import ABC, abstractmethod
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple, TypeVar

from ..state import ArchivalMemory, EntityLedger, MemoryState

__all__ = ["BaseStorageAdapter"]

T = TypeVar("T")

# How long an abandoned client may take to close before its loop stops anyway.
_ABANDON_SECONDS = 5.0


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


def dump_pool_state(entities: EntityLedger, archive: ArchivalMemory) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """A pool's ledger and archive as JSON objects, in sawtooth's shape:
    ``{"entities": {key: [values]}, ...}`` and ``{"narrative": ..., "token_count": ...}``."""
    if hasattr(entities, "model_dump"):
        ledger = dict(entities.model_dump(mode="json"))
    else:
        ledger = {"entities": {str(k): list(v) for k, v in entities.entities.items()}}
    if hasattr(archive, "model_dump"):
        narrative = dict(archive.model_dump(mode="json"))
    else:
        narrative = {"narrative": archive.narrative, "token_count": archive.token_count}
    return ledger, narrative


def load_pool_state_payload(ledger: Any, narrative: Any) -> Tuple[EntityLedger, ArchivalMemory]:
    """The ledger and archive :func:`dump_pool_state` (or sawtooth) wrote;
    ``ValueError`` when either is not a JSON object of that shape."""
    if not isinstance(ledger, Mapping) or not isinstance(narrative, Mapping):
        raise ValueError("a pool state needs a ledger object and an archive object")
    entities = ledger.get("entities") or {}
    if not isinstance(entities, Mapping):
        raise ValueError("a pool ledger's 'entities' must be an object")
    values = {str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in entities.items()}
    if hasattr(EntityLedger, "model_validate"):
        loaded_ledger = EntityLedger.model_validate({**ledger, "entities": values})
    else:
        loaded_ledger = EntityLedger(entities={k: tuple(v) for k, v in values.items()})
    if hasattr(ArchivalMemory, "model_validate"):
        loaded_archive = ArchivalMemory.model_validate(dict(narrative))
    else:
        loaded_archive = ArchivalMemory(
            narrative=str(narrative.get("narrative", "")), token_count=int(narrative.get("token_count", 0))
        )
    return loaded_ledger, loaded_archive


class _LoopThread:
    """An event loop running in a daemon thread, and the client on it."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.client: Any = None
        self.opening = asyncio.Lock()  # binds to self.loop on first use
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def submit(self, work: Awaitable[T]) -> "asyncio.Future[T]":
        """``work`` run on this loop, as a future of the caller's loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    def stop(self) -> None:
        """Stops the loop and waits for the thread (which closes the loop)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()

    def abandon(self, close: Callable[[Any], Awaitable[None]]) -> None:
        """Closes the client (for a few seconds at most) and stops the loop,
        without waiting: its adapter was garbage-collected unclosed."""

        async def shutdown() -> None:
            try:
                if self.client is not None:
                    await asyncio.wait_for(close(self.client), _ABANDON_SECONDS)
            except Exception:  # nobody is left to tell
                pass
            finally:
                self.loop.stop()

        if self.pid == os.getpid() and not self.loop.is_closed():
            try:
                asyncio.run_coroutine_threadsafe(shutdown(), self.loop)
            except RuntimeError:  # the loop closed meanwhile
                pass


class ClientOnOwnLoop:
    """A storage adapter's client (a connection pool) kept on an event loop
    of the adapter's own, in a daemon thread started on first use: every
    call runs there and is awaited from the caller's loop, whichever it is,
    so one pool serves them all and none is left behind on a closed loop.

    A subclass says how to open the client (:meth:`_open_client`, run on the
    adapter's loop, once, and again after a failure) and close it
    (:meth:`_close_client`); :meth:`close` closes it and stops the thread (the
    next call starts them again). An adapter garbage-collected unclosed
    closes its client and stops its thread; in the child of a ``fork`` the
    adapter starts a loop and a client of its own, leaving the parent's
    connections alone.
    """

    _thread_name = "chatfold-storage"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runner: Optional[_LoopThread] = None

    async def _open_client(self) -> Any:
        """Opens the client (on the adapter's loop)."""
        raise NotImplementedError

    @staticmethod
    async def _close_client(client: Any) -> None:
        """Closes the client (on the adapter's loop). A static method: the
        finalizer of a garbage-collected adapter calls it without the adapter."""
        raise NotImplementedError

    def _current_runner(self) -> _LoopThread:
        with self._lock:
            if self._runner is None or self._runner.pid != os.getpid():
                self._runner = runner = _LoopThread(self._thread_name)
                weakref.finalize(self, runner.abandon, type(self)._close_client)
            return self._runner

    async def _with_client(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(client)`` run on the adapter's loop, awaited from the caller's."""
        runner = self._current_runner()

        async def run() -> T:
            if runner.client is None:
                async with runner.opening:
                    if runner.client is None:
                        runner.client = await self._open_client()
            return await work(runner.client)

        return await runner.submit(run())

    async def close(self) -> None:
        """Closes the client and stops the adapter's loop; the next call starts them again."""
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is None or runner.pid != os.getpid():
            return
        try:
            if runner.client is not None:
                await runner.submit(self._close_client(runner.client))
        finally:
            await asyncio.get_running_loop().run_in_executor(None, runner.stop)
