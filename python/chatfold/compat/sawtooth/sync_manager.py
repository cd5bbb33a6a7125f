"""sawtooth-memory's ``SyncContextManager``: the same tiers for sync code,
folds run inline on the calling thread (no event loop, no thread)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ._core import Tiers
from .async_bridge import run_coro_once
from .config import ContextManagerConfig
from .exceptions import NotSupportedError
from .middleware import MessageRole, _health
from .state import MemoryState
from .storage.semantic import SemanticChunkResult

__all__ = ["SyncContextManager"]


class SyncContextManager:
    """Sync hierarchical memory for scripts, notebooks and WSGI apps: use it
    in a ``with`` block. When a fold is due, ``add_message`` runs it inline
    (blocking, as sawtooth does); a summarizer's failure is counted in
    ``get_stats()["compression"]``, never raised, and loses nothing.

    The default configuration is ``ContextManagerConfig.for_sync_script()``;
    ``summarize`` is chatfold's addition (as for :class:`ContextManager`; a
    coroutine function is run to completion with ``asyncio.run``, so not
    from inside a running event loop: there, use :class:`ContextManager`;
    such a fold fails and is counted, nothing lost). sawtooth's sync manager emits
    no events, and neither does this one.
    """

    def __init__(
        self,
        system_prompt: str,
        config: Optional[ContextManagerConfig] = None,
        *,
        summarize: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        self._config = config or ContextManagerConfig.for_sync_script()
        self._tiers = Tiers(system_prompt, self._config, summarize, None)
        self._cycles = 0
        self._failures = 0
        self._started = False

    def __enter__(self) -> "SyncContextManager":
        adapter = self._config.storage_adapter
        if adapter is not None:
            self._tiers.restore(run_coro_once(adapter.load_state(self._config.session_id)))
        self._started = True
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self._persist(force=True)
        self._started = False

    def _persist(self, *, force: bool = False) -> None:
        adapter = self._config.storage_adapter
        if adapter is None or not (force or self._tiers.dirty):
            return
        run_coro_once(adapter.save_state(self._config.session_id, self._tiers.snapshot()))
        self._tiers.dirty = False

    def add_message(self, role: MessageRole, content: str) -> None:
        """Appends a turn to L1 and folds inline when a fold is due. With
        ``fallback_truncate=False`` it raises ``TokenLimitExceededError`` once
        L1 holds ``hard_limit_tokens`` (the turn is stored first)."""
        if not self._started:
            raise RuntimeError("SyncContextManager must be used within a 'with' context.")
        try:
            self._tiers.add(role, content)
        finally:
            while self._tiers.fold_due():
                self._cycles += 1
                if not self._tiers.fold_inline():
                    self._failures += 1
                    break  # retried on the next add, as the core counts failures
        if self._config.persist_every_message:
            self._persist(force=True)

    def retrieve_observation(self, cache_id: str) -> Optional[str]:
        """Always ``None``: chatfold crushes no tool observations."""
        return None

    def pin_entity(self, key: str, value: str) -> None:
        """Not supported: chatfold's core keeps the ledger from what it folds."""
        raise NotSupportedError("pin_entity", "chatfold's core keeps the ledger from what it folds")

    def build_prompt(self, *, retrieval_query: Optional[str] = None) -> List[Dict[str, str]]:
        """The prompt in sawtooth's layout, never more than ``hard_limit_tokens``."""
        prompt = self._tiers.prompt()
        self._persist()
        return prompt

    def explain_prompt(self) -> Dict[str, Any]:
        """sawtooth's audit trace of what the prompt holds and why."""
        return self._tiers.explain()

    def search_semantic_archive(self, query: str, top_k: int = 5) -> List[SemanticChunkResult]:
        """Always ``[]``: chatfold has no L3 storage."""
        return []

    def l3_chunk_count(self) -> int:
        """Always 0: chatfold has no L3 storage."""
        return 0

    @property
    def state(self) -> MemoryState:
        """A frozen snapshot of the tiers (see :mod:`.state`)."""
        return self._tiers.snapshot()

    def get_stats(self) -> Dict[str, Any]:
        """sawtooth's stats, with ``compression`` (cycles, failures,
        ``"inline_sync"``), plus ``chatfold`` (the tiered memory's own)."""
        stats = self._tiers.stats()
        stats["compression"] = {"cycles": self._cycles, "failures": self._failures, "mode": "inline_sync"}
        return stats

    def health_check(self) -> Dict[str, Any]:
        """sawtooth's readiness report (``ValueError`` when the soft limit
        is not below the hard limit)."""
        report = _health(self._config, self._tiers, "INLINE", None)
        del report["checks"]["worker_status"]
        report["checks"]["runtime"] = "sync_inline"
        report["checks"]["compression_mode"] = "blocking"
        return report
