"""sawtooth-memory's async ``ContextManager`` over chatfold's tiered memory.

``add_message`` never waits for a fold: past ``soft_limit_tokens`` the
tiered memory's worker (an asyncio task started by ``start()`` / ``async
with``) folds the oldest turns into one running summary with an
exact-identifier ledger. ``build_prompt()`` compiles sawtooth's layout and
never returns more than ``hard_limit_tokens``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Optional

from ._core import Tiers
from .config import ContextManagerConfig
from .events.bus import EventBus, get_event_bus
from .events.handlers import make_journal_handler
from .events.types import SawtoothEvent
from .journal import AsyncCompressionJournal
from .state import MemoryState
from .storage.semantic import SemanticChunkResult

__all__ = ["ContextManager"]

MessageRole = Literal["user", "assistant", "system", "tool"]


class ContextManager:
    """Async hierarchical memory (sawtooth's): L0 the system prompt, L2 the
    running summary, L1.5 its ledger of exact identifiers, L1 the recent
    turns verbatim.

    ``summarize`` is chatfold's addition: a summarizer ``f(request) -> str``
    (or a coroutine function) used instead of the configured backend. By
    default the configuration decides: ``compression_mode="dte"`` (sawtooth's
    default) folds without a model, with chatfold's extractive summarizer;
    ``"always_llm"`` calls the ``cloud`` or ``ollama`` backend (in Rust).

    With ``enable_events`` (the default) the events are emitted on the
    process's event bus (:func:`~.events.get_event_bus`) and each completed
    cycle is written to the journal at ``journal_path`` (default
    ``config.journal_path``), as sawtooth does.
    """

    def __init__(
        self,
        system_prompt: str,
        config: Optional[ContextManagerConfig] = None,
        *,
        enable_events: bool = True,
        journal_path: Optional[Path] = None,
        summarize: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        self._config = config or ContextManagerConfig()
        self._enable_events = enable_events
        self._bus: Optional[EventBus] = get_event_bus() if enable_events else None
        self._tiers = Tiers(system_prompt, self._config, summarize, self._bus)
        self._journal: Optional[AsyncCompressionJournal] = None
        self._journal_handler: Any = None
        if enable_events:
            self._journal = AsyncCompressionJournal(Path(journal_path or self._config.journal_path))
        self._running = False

    @property
    def _memory(self) -> Any:
        return self._tiers.memory

    async def start(self) -> None:
        """Loads the session from ``storage_adapter`` (if any) and starts
        the background worker (and the journal)."""
        if self._running:
            return
        adapter = self._config.storage_adapter
        if adapter is not None:
            self._tiers.restore(await adapter.load_state(self._config.session_id))
        if self._journal is not None and self._bus is not None:
            await self._journal.start()
            write = make_journal_handler(self._journal)
            own = self._tiers.own_cycles

            async def journal_handler(event: SawtoothEvent) -> None:
                if event.cycle_id in own:  # this manager's cycles only
                    own.discard(event.cycle_id)
                    await write(event)  # type: ignore[arg-type]

            self._journal_handler = journal_handler
            self._bus.subscribe("compression.cycle_complete", journal_handler)
        self._memory.start()
        self._running = True

    async def stop(self) -> None:
        """Saves the session (if a storage adapter is set), stops the
        worker (a fold in flight is abandoned, nothing lost) and flushes the
        events and the journal."""
        await self._persist(force=True)
        await self._memory.stop()
        self._running = False
        if self._bus is not None:
            await self._bus.drain()
            if self._journal_handler is not None:
                self._bus.unsubscribe("compression.cycle_complete", self._journal_handler)
                self._journal_handler = None
        if self._journal is not None:
            await self._journal.stop()

    async def __aenter__(self) -> "ContextManager":
        await self.start()
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.stop()

    async def _persist(self, *, force: bool = False) -> None:
        adapter = self._config.storage_adapter
        if adapter is None or not (force or self._tiers.dirty):
            return
        await adapter.save_state(self._config.session_id, self._tiers.snapshot())
        self._tiers.dirty = False

    async def add_message(self, role: MessageRole, content: str) -> None:
        """Appends a turn to L1; never waits for a fold. With
        ``fallback_truncate=False`` it raises ``TokenLimitExceededError``
        once L1 holds ``hard_limit_tokens`` (the turn is stored first)."""
        self._tiers.add(role, content)
        if self._config.persist_every_message:
            await self._persist(force=True)

    async def build_prompt(self, *, retrieval_query: Optional[str] = None) -> List[Dict[str, str]]:
        """The prompt, OpenAI-style: one system message (``[SYSTEM_L0]``,
        ``[ARCHIVE_L2]``, ``[ENTITY_LEDGER_L1_5]``), then L1's turns; never
        more than ``hard_limit_tokens`` (``retrieval_query`` is for L3, which
        chatfold does not have)."""
        prompt = self._tiers.prompt()
        await self._persist()
        return prompt

    def retrieve_observation(self, cache_id: str) -> Optional[str]:
        """sawtooth's crushed tool observations: chatfold crushes none, so
        there is never one to retrieve (``None``)."""
        return None

    async def pin_entity(self, key: str, value: str) -> None:
        """Not supported: chatfold's core keeps the ledger from what it folds."""
        from .exceptions import NotSupportedError

        raise NotSupportedError("pin_entity", "chatfold's core keeps the ledger from what it folds")

    async def search_semantic_archive(self, query: str, top_k: int = 5) -> List[SemanticChunkResult]:
        """L3 search: chatfold has no L3 storage, so nothing is found (``[]``)."""
        return []

    async def l3_chunk_count(self) -> int:
        """L3 chunks indexed: always 0 (no L3 storage)."""
        return 0

    def explain_prompt(self) -> Dict[str, Any]:
        """sawtooth's audit trace of what the prompt holds and why."""
        return self._tiers.explain()

    @property
    def state(self) -> MemoryState:
        """A frozen snapshot of the tiers (see :mod:`.state`)."""
        return self._tiers.snapshot()

    def get_stats(self) -> Dict[str, Any]:
        """sawtooth's stats: tokens per tier, the ledger's size, the DTE
        counts and ``worker`` (processed, failed, queue_depth, running);
        plus ``chatfold``, the tiered memory's own stats (hidden and dropped
        messages, the last error)."""
        stats = self._tiers.stats()
        s = stats["chatfold"]
        stats["worker"] = {
            "processed": s["folds_done"],
            "failed": s["folds_failed"],
            "queue_depth": s["folds_pending"],
            "running": self._running,
        }
        return stats

    def __repr__(self) -> str:
        s = self.get_stats()
        return (
            f"<ContextManager l1={s['l1_tokens']}/{self._config.soft_limit_tokens} tokens, "
            f"l1_msgs={s['l1_message_count']}, l2_tokens={s['l2_tokens']}, "
            f"entities={s['l1_5_entity_count']}, queue={s['worker']['queue_depth']}>"
        )

    async def health_check(self) -> Dict[str, Any]:
        """sawtooth's readiness report; raises ``ValueError`` when
        ``soft_limit_tokens`` is not below ``hard_limit_tokens``. The
        backend is named, not called."""
        return _health(self._config, self._tiers, "RUNNING" if self._running else "STOPPED", self._enable_events)


def _health(config: ContextManagerConfig, tiers: Tiers, worker: str, events: Optional[bool]) -> Dict[str, Any]:
    if config.soft_limit_tokens >= config.hard_limit_tokens:
        raise ValueError(
            f"Configuration Error: soft_limit_tokens ({config.soft_limit_tokens}) "
            f"must be strictly less than hard_limit_tokens ({config.hard_limit_tokens})."
        )
    checks: Dict[str, Any] = {"configuration": "OK", "worker_status": worker}
    if events is not None:
        checks["events"] = "ENABLED" if events else "DISABLED"
    checks["backend"] = tiers.provider
    checks["model"] = tiers.model
    checks["backend_reachable"] = "NOT_CHECKED"  # chatfold does not call the model to check it
    checks["l3_semantic_storage"] = "DISABLED"
    checks["l3_prompt_retrieval"] = "DISABLED"
    return {"status": "healthy", "checks": checks}
