"""sawtooth-memory's ``SyncContextManager``: the same tiers for sync code,
folds run inline on the calling thread (no event loop, no thread)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

from ._core import Tiers
from .async_bridge import run_coro_once
from .compression_core import merge_compression_into_state, messages_to_text
from .config import ContextManagerConfig, OllamaConfig
from .middleware import MessageRole, _health, _reachable, _unreachable
from .state import MemoryState, Message, holdable_entities, split_summary
from .storage.semantic import SemanticChunkResult
from .sync_compressor import SyncCloudCompressor, SyncOllamaCompressor

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

    In ``"always_llm"`` mode with the compressor (no ``summarize``), when L1
    is past the soft limit and chatfold's core has nothing to fold (it never
    folds the latest turn), the oldest ``chunk_size`` turns are compressed
    as sawtooth does, the latest one included: the compressor's narrative
    appended to L2, its entities upserted into L1.5, the turns gone from L1.
    ``strict=True`` keeps chatfold's stricter behaviour instead (the latest
    turn stays verbatim; see :class:`~.middleware.ContextManager`).
    """

    def __init__(
        self,
        system_prompt: str,
        config: Optional[ContextManagerConfig] = None,
        *,
        summarize: Optional[Callable[[Any], Any]] = None,
        strict: bool = False,
    ) -> None:
        self._config = config or ContextManagerConfig.for_sync_script()
        # The compressor is looked up in this module when the manager is made
        # (so a patch of ``sync_manager.SyncOllamaCompressor`` takes effect):
        # ``health_check`` pings it, and in ``"always_llm"`` mode (without
        # ``summarize``) each fold is its ``compress`` of the folded turns,
        # the narrative appended to L2 as sawtooth does.
        self._compressor: Union[SyncCloudCompressor, SyncOllamaCompressor] = (
            SyncCloudCompressor(self._config.cloud)
            if self._config.cloud is not None
            else SyncOllamaCompressor(self._config.ollama or OllamaConfig())
        )
        self._own_cycles = summarize is None and self._config.compression_mode == "always_llm" and not strict
        if summarize is None and self._config.compression_mode == "always_llm":
            summarize = self._compress
        self._tiers = Tiers(system_prompt, self._config, summarize, None, strict)
        if summarize == self._compress:
            self._tiers.provider = "cloud" if self._config.cloud is not None else "ollama"
            self._tiers.model = (self._config.cloud or self._config.ollama or OllamaConfig()).model
        self._cycles = 0
        self._failures = 0
        self._entities: Dict[str, str] = {}  # the compressor's, from folds not yet merged
        self._started = False

    def _compressor_result(self, messages: List[Any]) -> Dict[str, Any]:
        """The compressor's answer for ``messages`` (sawtooth's transcript:
        ``ROLE: content`` paragraphs), its entities each made one the ledger
        can hold (:func:`~.state.holdable_entities`); ``ValueError`` without
        a narrative."""
        result = self._compressor.compress(messages_to_text(messages))
        if not isinstance(result, dict) or not str(result.get("narrative_summary") or "").strip():
            raise ValueError("the compressor returned no narrative_summary")
        entities = result.get("extracted_entities")
        if isinstance(entities, dict):
            result = {**result, "extracted_entities": holdable_entities(entities)}
        return result

    def _compress(self, request: Any) -> str:
        """One fold of chatfold's core through the compressor: its narrative
        of the folded turns appended to the narrative so far (L2 is
        append-only in sawtooth); its entities are upserted into L1.5 once
        the fold has landed (:meth:`_merge_entities`)."""
        folded = [Message.model_construct(role=m["role"], content=m.get("content") or "") for m in request.messages]
        result = self._compressor_result(folded)
        self._entities.update(holdable_entities(dict(result.get("extracted_entities") or {})))
        narrative = str(result["narrative_summary"]).strip()
        previous = split_summary(request.previous_summary or "")[0]
        return f"{previous}\n{narrative}" if previous else narrative

    def _merge_entities(self) -> None:
        """The entities the compressor found in the folds that landed, into
        L1.5 (each already one the ledger can hold; should the edit still
        be refused, it is counted as a failure, the ledger unchanged)."""
        entities, self._entities = self._entities, {}
        if not entities:
            return
        self._tiers.live_state().l1_5_entities.upsert(entities)
        try:
            self._tiers.sync()
        except ValueError:
            self._failures += 1

    def _compress_latest(self) -> None:
        """sawtooth's cycle for what the core does not fold (the latest
        turn): when L1 is past the soft limit, its oldest ``chunk_size``
        turns go through the compressor and leave L1 (a failure is counted
        and loses nothing)."""
        state = self._tiers.live_state()
        if state.l1_working.token_count < self._config.soft_limit_tokens or not state.l1_working.messages:
            return
        chunk = state.l1_working.messages[: self._config.chunk_size]
        self._cycles += 1
        try:
            result = self._compressor_result(chunk)
        except Exception:
            self._failures += 1
            return
        state.l1_working.slice_oldest(len(chunk))
        merge_compression_into_state(state, result)
        try:
            self._tiers.sync()
        except ValueError:  # e.g. an entity the ledger cannot hold: the edit is discarded, nothing lost
            self._failures += 1

    def __enter__(self) -> "SyncContextManager":
        adapter = self._config.storage_adapter
        if adapter is not None:
            self._tiers.restore(run_coro_once(adapter.load_state(self._config.session_id)))
        self._started = True
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        """Saves the session; an edit of the state that cannot be applied is
        discarded, the memory's state saved all the same, and then its
        ``ValueError`` raised (the manager is closed either way)."""
        failure = None
        try:
            failure = self._tiers.sync_for_close()
            self._persist(force=True)
        finally:
            self._started = False
        if failure is not None:
            raise failure

    def _persist(self, *, force: bool = False) -> None:
        adapter = self._config.storage_adapter
        if adapter is None or not (force or self._tiers.dirty):
            return
        run_coro_once(adapter.save_state(self._config.session_id, self._tiers.snapshot()))
        self._tiers.dirty = False

    def add_message(self, role: MessageRole, content: str) -> None:
        """Appends a turn to L1 and folds inline when a fold is due. With
        ``fallback_truncate=False`` it raises ``TokenLimitExceededError`` once
        L1 holds ``hard_limit_tokens`` (the turn is stored first), and
        ``ValueError`` after storing it when a pending edit of ``state``
        cannot be applied (the edit is discarded)."""
        if not self._started:
            raise RuntimeError("SyncContextManager must be used within a 'with' context.")
        self._tiers.add(role, content)  # an error is raised at once, as sawtooth's
        while self._tiers.fold_due():
            self._cycles += 1
            if not self._tiers.fold_inline():
                self._failures += 1
                break  # retried on the next add, as the core counts failures
        self._merge_entities()
        if self._own_cycles and not self._tiers.fold_due():
            self._compress_latest()
        if self._config.persist_every_message:
            self._persist(force=True)

    def retrieve_observation(self, cache_id: str) -> Optional[str]:
        """Always ``None``: chatfold crushes no tool observations."""
        return None

    def pin_entity(self, key: str, value: str) -> None:
        """Puts ``key: value`` in the ledger (L1.5) now, and saves the
        session; the fold keeps it verbatim from then on."""
        self._tiers.pin(key, value)
        self._persist(force=True)

    def build_prompt(self, *, retrieval_query: Optional[str] = None) -> List[Dict[str, str]]:
        """The prompt in sawtooth's layout, never more than
        ``hard_limit_tokens``; ``RuntimeError`` outside the ``with`` block."""
        if not self._started:
            raise RuntimeError("SyncContextManager must be used within a 'with' context.")
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
        """The live state (see :mod:`.state`): it follows the memory, and
        an edit to it reaches the memory on the manager's next call."""
        return self._tiers.live_state()

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
        try:
            self._compressor.ping()
        except Exception as error:
            _unreachable(report, self._config, error)
        else:
            _reachable(report, self._config)
        del report["checks"]["worker_status"]
        report["checks"]["runtime"] = "sync_inline"
        report["checks"]["compression_mode"] = "blocking"
        return report
