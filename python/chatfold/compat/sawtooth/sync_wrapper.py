"""sawtooth-memory's ``SawtoothSyncWrapper``: sync calls over the async
:class:`~.middleware.ContextManager`, whose worker keeps folding in the
background on an event loop in a thread of its own (sawtooth uses an AnyIO
portal; chatfold a plain asyncio loop, no dependency)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, TypeVar

from .config import ContextManagerConfig
from .middleware import ContextManager, MessageRole
from .state import MemoryState
from .storage.semantic import SemanticChunkResult

__all__ = ["SawtoothSyncWrapper"]

T = TypeVar("T")


class SawtoothSyncWrapper:
    """A thread-safe sync façade over :class:`ContextManager`: use it in a
    ``with`` block; ``add_message`` returns at once while folds run on the
    wrapper's own event loop. Calls from several threads run one at a time
    on that loop; an edit of ``state`` made from a caller's thread reaches
    the memory on the next call (the live object is compared, applied and
    refreshed under its lock, and a fold landing meanwhile leaves it alone). ``summarize`` and ``strict``
    are chatfold's additions (see :class:`~.middleware.ContextManager`)."""

    def __init__(
        self,
        system_prompt: str,
        config: Optional[ContextManagerConfig] = None,
        *,
        enable_events: bool = True,
        journal_path: Optional[Path] = None,
        summarize: Optional[Callable[[Any], Any]] = None,
        strict: bool = False,
    ) -> None:
        self._system_prompt = system_prompt
        self._strict = strict
        self._config = config
        self._enable_events = enable_events
        self._journal_path = journal_path
        self._summarize = summarize
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._cm: Optional[ContextManager] = None

    def _require_live(self) -> Tuple[asyncio.AbstractEventLoop, ContextManager]:
        if self._loop is None or self._cm is None:
            raise RuntimeError("SawtoothSyncWrapper must be used within a 'with' context.")
        return self._loop, self._cm

    def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        loop, _ = self._require_live()

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), loop).result()

    def __enter__(self) -> "SawtoothSyncWrapper":
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="chatfold-sawtooth", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread

        async def setup() -> ContextManager:
            cm = ContextManager(
                self._system_prompt,
                self._config,
                enable_events=self._enable_events,
                journal_path=self._journal_path,
                summarize=self._summarize,
                strict=self._strict,
            )
            cm._tiers.threaded = True  # the caller edits the live state from its own thread
            await cm.start()
            return cm

        try:
            self._cm = asyncio.run_coroutine_threadsafe(setup(), loop).result()
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        try:
            if self._cm is not None and self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._cm.stop(), self._loop).result()
        finally:
            self._close()

    def _close(self) -> None:
        loop, thread = self._loop, self._thread
        self._cm = None
        self._loop = self._thread = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join()
            loop.close()

    def add_message(self, role: MessageRole, content: str) -> None:
        """Appends a turn to L1 (folds continue in the background)."""
        _, cm = self._require_live()
        self._call(lambda: cm.add_message(role, content))

    def retrieve_observation(self, cache_id: str) -> Optional[str]:
        """Always ``None``: chatfold crushes no tool observations."""
        _, cm = self._require_live()
        return cm.retrieve_observation(cache_id)

    def pin_entity(self, key: str, value: str) -> None:
        """Puts ``key: value`` in the ledger (L1.5) now (see :meth:`ContextManager.pin_entity`)."""
        _, cm = self._require_live()
        self._call(lambda: cm.pin_entity(key, value))

    def build_prompt(self, *, retrieval_query: Optional[str] = None) -> List[Dict[str, str]]:
        """The prompt in sawtooth's layout, never more than ``hard_limit_tokens``."""
        _, cm = self._require_live()
        return self._call(lambda: cm.build_prompt(retrieval_query=retrieval_query))

    def explain_prompt(self) -> Dict[str, Any]:
        """sawtooth's audit trace of what the prompt holds and why."""
        _, cm = self._require_live()
        return self._call(lambda: _now(cm.explain_prompt))

    def search_semantic_archive(self, query: str, top_k: int = 5) -> List[SemanticChunkResult]:
        """Always ``[]``: chatfold has no L3 storage."""
        _, cm = self._require_live()
        return self._call(lambda: cm.search_semantic_archive(query, top_k))

    def l3_chunk_count(self) -> int:
        """Always 0: chatfold has no L3 storage."""
        _, cm = self._require_live()
        return self._call(cm.l3_chunk_count)

    @property
    def state(self) -> MemoryState:
        """The manager's live state (see :mod:`.state`): edits to it reach the memory on the next call."""
        _, cm = self._require_live()
        return self._call(lambda: _now(lambda: cm.state))

    def get_stats(self) -> Dict[str, Any]:
        """The async manager's stats (with ``worker``)."""
        _, cm = self._require_live()
        return self._call(lambda: _now(cm.get_stats))

    def health_check(self) -> Dict[str, Any]:
        """The async manager's readiness report."""
        _, cm = self._require_live()
        return self._call(cm.health_check)


async def _now(f: Callable[[], T]) -> T:
    """``f()`` on the wrapper's loop (its state is read there, between folds)."""
    return f()
