"""sawtooth-memory's ``CompressionWorker`` and ``CompressionTask``.

In chatfold the folds are the tiered memory's: its worker (an asyncio task
the manager starts) folds whatever the core has due. ``ContextManager``
still queues sawtooth's tasks, so code that watches or patches
``CompressionWorker.enqueue`` sees a call for every compression cycle
sawtooth would queue (when L1 crosses the soft limit, with its debounce);
the task carries the turns L1 holds then. The worker counts what it was
given and wakes the memory's worker; it never summarizes itself, so a
patched ``enqueue`` does not stop chatfold's folds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

__all__ = ["CompressionTask", "CompressionWorker"]


@dataclass
class CompressionTask:
    """One compression cycle sawtooth would queue: the turns, the state and the cycle's id."""

    messages: List[Any]
    state: Any
    cycle_id: Optional[str] = None
    task_kind: str = "compress"
    fold_stub: Optional[str] = None
    entity_keys: List[str] = field(default_factory=list)
    tokens_evicted: int = 0


class CompressionWorker:
    """The manager's queue of compression cycles (see the module's text).
    ``compressor`` is kept for sawtooth's signature; the other keyword
    arguments sawtooth takes are accepted and unused."""

    def __init__(self, compressor: Any = None, fallback_truncate: bool = True, **options: Any) -> None:
        self.compressor = compressor
        self.fallback_truncate = fallback_truncate
        self.options = options
        self.queued: List[CompressionTask] = []
        self.wake: Optional[Callable[[], None]] = None
        self._running = False

    async def start(self) -> None:
        """Marks the worker running."""
        self._running = True

    async def stop(self) -> None:
        """Marks the worker stopped."""
        self._running = False

    def enqueue(self, task: CompressionTask) -> None:
        """Records ``task`` (the latest 100 are kept) and wakes the memory's worker."""
        self.queued = [*self.queued[-99:], task]
        if self.wake is not None:
            self.wake()

    def stats(self) -> Dict[str, Any]:
        """How many cycles were queued, and whether the worker runs."""
        return {"queued": len(self.queued), "running": self._running}
