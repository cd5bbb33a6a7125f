"""sawtooth-memory's async ``ContextManager`` over chatfold's tiered memory.

``add_message`` never waits for a fold: past ``soft_limit_tokens`` the
tiered memory's worker (an asyncio task started by ``start()`` / ``async
with``) folds the oldest turns into one running summary with an
exact-identifier ledger. ``build_prompt()`` compiles sawtooth's layout and
never returns more than ``hard_limit_tokens``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Optional, Set, Tuple, Union

from ._core import Tiers
from ._latest import fold_latest, latest_cycle_due, start_latest_cycle
from .compressor import CloudCompressor, OllamaCompressor
from .config import ContextManagerConfig, OllamaConfig
from .events.bus import EventBus, get_event_bus
from .events.handlers import make_journal_handler
from .events.types import EntityAnchoredEvent, SawtoothEvent
from .journal import AsyncCompressionJournal
from .monitor import TokenMonitor
from .state import MemoryState
from .storage.semantic import SemanticChunkResult
from .worker import CompressionTask, CompressionWorker

__all__ = ["ContextManager"]

MessageRole = Literal["user", "assistant", "system", "tool"]


def _extract_entity_event(record: Dict[str, Any]) -> Tuple[Any, Any, Any]:
    """(entity_key, operation, timestamp) of a journal record of an
    ``EntityAnchoredEvent``, in any of sawtooth's three layouts (fields
    under ``payload``, under ``data``, or at the root); ``(None,
    "unknown", "unknown")`` for any other record."""
    payload = record.get("payload")
    if isinstance(payload, dict):
        event_type = str(record.get("event_type", "")).lower()
        if "entity_key" in payload or "entity_anchor" in event_type:
            return (
                payload.get("entity_key"),
                payload.get("operation", "unknown"),
                payload.get("timestamp", record.get("timestamp", "unknown")),
            )
    data = record.get("data")
    if isinstance(data, dict) and (record.get("channel") == EntityAnchoredEvent.event_type or "entity_key" in data):
        return (
            data.get("entity_key"),
            data.get("operation", "unknown"),
            data.get("timestamp", record.get("timestamp", "unknown")),
        )
    if record.get("channel") == EntityAnchoredEvent.event_type or "entity_key" in record:
        return (record.get("entity_key"), record.get("operation", "unknown"), record.get("timestamp", "unknown"))
    return (None, "unknown", "unknown")


def _journal_lineage(path: Path) -> Dict[str, Dict[str, Any]]:
    """Each ledger key's last entity record in the journal at ``path``
    (its operation, timestamp and strategy); unreadable lines are skipped."""
    lineage: Dict[str, Dict[str, Any]] = {}
    try:
        with open(path, "r", encoding="utf-8") as journal:
            lines = journal.readlines()
    except OSError:
        return lineage
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        key, operation, timestamp = _extract_entity_event(record)
        if key:
            fields = record.get("payload") or record.get("data") or record
            strategy = fields.get("strategy", "deterministic") if isinstance(fields, dict) else "deterministic"
            lineage[str(key)] = {"operation": operation, "timestamp": timestamp, "strategy": strategy}
    return lineage


class ContextManager:
    """Async hierarchical memory (sawtooth's): L0 the system prompt, L2 the
    running summary, L1.5 its ledger of exact identifiers, L1 the recent
    turns verbatim.

    ``summarize`` is chatfold's addition: a summarizer ``f(request) -> str``
    (or a coroutine function) used instead of the configured backend. By
    default the configuration decides: ``compression_mode="dte"`` (sawtooth's
    default) folds without a model, with chatfold's extractive summarizer;
    ``"always_llm"`` calls the ``cloud`` or ``ollama`` backend (in Rust).

    At the hard limit with ``fallback_truncate`` in ``"always_llm"`` mode,
    the oldest ``chunk_size`` turns leave L1 at once and L2 notes it, as in
    sawtooth (the latest turn always stays; not while a fold is under way:
    its landing shrinks L1, and the prompt keeps within the limit meanwhile).
    When L1 is past the soft limit with nothing the core would fold (the
    latest turn), a queued cycle folds the oldest ``chunk_size`` turns
    in the background, the latest included, and its ``L1EvictionEvent`` is
    sent when it is queued, as in sawtooth (see :mod:`._latest`). ``strict=True`` (chatfold's
    addition) keeps chatfold's stricter behaviour instead: no turn leaves
    the state before its fold lands (the prompt still never passes the hard
    limit), turns are dropped only after repeated fold failures, and the
    latest turn is never folded (see :class:`~.sync_manager.SyncContextManager`).

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
        strict: bool = False,
    ) -> None:
        self._config = config or ContextManagerConfig()
        self._enable_events = enable_events
        self._bus: Optional[EventBus] = get_event_bus() if enable_events else None
        self._event_bus = self._bus
        self._tiers = Tiers(system_prompt, self._config, summarize, self._bus, strict)
        self._journal_path = Path(journal_path or self._config.journal_path)
        self._journal: Optional[AsyncCompressionJournal] = None
        self._journal_handler: Any = None
        self._entity_handler: Any = None
        if enable_events:
            self._journal = AsyncCompressionJournal(self._journal_path)
        # sawtooth's parts, looked up in this module when the manager is
        # made (so a patch of ``middleware.OllamaCompressor`` and the like
        # takes effect): the compressor is what ``health_check`` pings, the
        # monitor and the worker's queue see each cycle sawtooth would queue.
        # The folds themselves are the tiered memory's (see .worker).
        self._compressor: Union[CloudCompressor, OllamaCompressor] = (
            CloudCompressor(self._config.cloud)
            if self._config.cloud is not None
            else OllamaCompressor(self._config.ollama or OllamaConfig())
        )
        self._monitor = TokenMonitor(
            model=self._config.tokenizer_model,
            soft_limit=self._config.soft_limit_tokens,
            hard_limit=self._config.hard_limit_tokens,
            max_unsummarized_turns=getattr(self._config, "max_unsummarized_turns", None),
        )
        self._worker = CompressionWorker(compressor=self._compressor, fallback_truncate=self._config.fallback_truncate)
        self._worker.wake = self._wake_memory
        self._tiers.fold_done = self._monitor.release_compression_lock
        self._running = False
        self._latest: Set["asyncio.Task[None]"] = set()  # cycles of the latest turn (see ._latest)

    def _wake_memory(self) -> None:
        wake = getattr(self._memory, "_wake", None)
        if wake is not None:
            wake.set()

    @property
    def _state(self) -> MemoryState:
        return self._tiers.live_state()

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

            path = self._journal_path

            async def entity_handler(event: EntityAnchoredEvent) -> None:
                # sawtooth's record of a ledger change, read by explain_prompt
                if event.event_id not in own:
                    return
                own.discard(event.event_id)
                record = {
                    "event_type": "entity_anchored",
                    "payload": {
                        "entity_key": event.entity_key,
                        "entity_value": event.entity_value,
                        "operation": event.operation,
                        "strategy": getattr(event, "strategy", "deterministic"),
                    },
                    "timestamp": event.timestamp.isoformat(),
                }
                try:
                    with open(path, "a", encoding="utf-8") as journal:
                        journal.write(json.dumps(record) + "\n")
                except OSError:
                    pass  # as sawtooth's: a journal that cannot be written loses the lineage only

            self._journal_handler = journal_handler
            self._entity_handler = entity_handler
            self._bus.subscribe("compression.cycle_complete", journal_handler)
            self._bus.subscribe(EntityAnchoredEvent.event_type, entity_handler)
        self._memory.start()
        await self._worker.start()
        self._running = True

    async def stop(self) -> None:
        """Saves the session (if a storage adapter is set), stops the
        worker (a fold in flight is abandoned, nothing lost) and flushes the
        events and the journal. An edit of the state that cannot be applied
        is discarded, the memory's state saved and the worker stopped all
        the same, and then its ``ValueError`` raised."""
        failure = None
        try:
            failure = self._tiers.sync_for_close()
            await self._persist(force=True)
        finally:
            await self._shut_down()
        if failure is not None:
            raise failure

    async def _shut_down(self) -> None:
        """Stops the worker and flushes the events and the journal."""
        try:
            for task in list(self._latest):
                task.cancel()  # the turns stay in L1
            if self._latest:
                await asyncio.gather(*self._latest, return_exceptions=True)
            await self._memory.stop()
            await self._worker.stop()
        finally:
            self._running = False
            if self._bus is not None:
                await self._bus.drain()
                if self._journal_handler is not None:
                    self._bus.unsubscribe("compression.cycle_complete", self._journal_handler)
                    self._journal_handler = None
                if self._entity_handler is not None:
                    self._bus.unsubscribe(EntityAnchoredEvent.event_type, self._entity_handler)
                    self._entity_handler = None
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
        once L1 holds ``hard_limit_tokens`` (the turn is stored first), and
        ``ValueError`` after storing it when a pending edit of ``state``
        cannot be applied (the edit is discarded)."""
        self._tiers.add(role, content)
        state = self._tiers.live or self._tiers.live_state()
        if self._monitor.exceeds_hard_limit(state):
            # sawtooth's hard-limit path releases the lock so a fresh cycle
            # can be queued; chatfold keeps the turns until their fold lands
            self._monitor.release_compression_lock()
        if self._monitor.should_trigger_compression(state):
            chunk = list(state.l1_working.messages[: self._config.chunk_size])
            cycle = str(uuid.uuid4())
            if latest_cycle_due(self._tiers):
                # sawtooth's cycle of the latest turn, which the core does not fold
                start_latest_cycle(self._tiers, chunk, cycle)
                task = asyncio.get_running_loop().create_task(fold_latest(self._tiers, chunk, cycle))
                self._latest.add(task)
                task.add_done_callback(self._latest.discard)
            self._worker.enqueue(CompressionTask(messages=chunk, state=state, cycle_id=cycle))
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
        """Puts ``key: value`` in the ledger (L1.5) now, and saves the
        session; the fold keeps it verbatim from then on."""
        self._tiers.pin(key, value)
        await self._persist(force=True)

    async def search_semantic_archive(self, query: str, top_k: int = 5) -> List[SemanticChunkResult]:
        """L3 search: chatfold has no L3 storage, so nothing is found (``[]``)."""
        return []

    async def l3_chunk_count(self) -> int:
        """L3 chunks indexed: always 0 (no L3 storage)."""
        return 0

    def explain_prompt(self) -> Dict[str, Any]:
        """sawtooth's audit trace of what the prompt holds and why: each
        ledger entry's last operation and time read from the journal (when
        events are on), as sawtooth does."""
        lineage = _journal_lineage(self._journal_path) if self._enable_events else None
        return self._tiers.explain(lineage)

    @property
    def state(self) -> MemoryState:
        """The live state (see :mod:`.state`): it follows the memory, and
        an edit to it reaches the memory on the manager's next call."""
        return self._tiers.live_state()

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
        backend is checked with the compressor's ``ping`` (Ollama: ``GET
        /api/tags``; a cloud provider: its API key is set)."""
        report = _health(self._config, self._tiers, "RUNNING" if self._running else "STOPPED", self._enable_events)
        try:
            await self._compressor.ping()
        except Exception as error:
            _unreachable(report, self._config, error)
        else:
            _reachable(report, self._config)
        return report


def _reachable(report: Dict[str, Any], config: ContextManagerConfig) -> None:
    """sawtooth's report of a backend that answered the ping."""
    report["checks"]["backend_reachable"] = "CONFIGURED" if config.cloud is not None else "OK"


def _unreachable(report: Dict[str, Any], config: ContextManagerConfig, error: Exception) -> None:
    """sawtooth's report of a backend whose ping failed: a cloud backend
    without a key is unhealthy, an unreachable Ollama degraded."""
    if config.cloud is not None:
        report["status"] = "unhealthy"
        report["checks"]["backend_reachable"] = f"MISSING: {error}"
    else:
        report["status"] = "degraded"
        report["checks"]["backend_reachable"] = f"UNREACHABLE: {error}"


def _health(config: ContextManagerConfig, tiers: Tiers, worker: str, events: Optional[bool]) -> Dict[str, Any]:
    if config.soft_limit_tokens >= config.hard_limit_tokens:
        raise ValueError(
            f"Configuration Error: soft_limit_tokens ({config.soft_limit_tokens}) "
            f"must be strictly less than hard_limit_tokens ({config.hard_limit_tokens})."
        )
    checks: Dict[str, Any] = {"configuration": "OK", "worker_status": worker}
    if events is not None:
        checks["events"] = "ENABLED" if events else "DISABLED"
    if config.cloud is not None:
        checks["backend"] = "cloud"
        checks["provider"] = config.cloud.provider.value if hasattr(config.cloud.provider, "value") else str(config.cloud.provider)
        checks["model"] = config.cloud.model
    else:
        checks["backend"] = "ollama"
        checks["model"] = config.ollama.model if config.ollama is not None else "unknown"
    checks["l3_semantic_storage"] = "DISABLED"
    checks["l3_prompt_retrieval"] = "DISABLED"
    return {"status": "healthy", "checks": checks}
