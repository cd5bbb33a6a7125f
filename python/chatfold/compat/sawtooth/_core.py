"""What the managers share: sawtooth's configuration read into chatfold's
:class:`~chatfold.TieredMemory`, the prompt in sawtooth's layout, the stats
under sawtooth's keys, the live state (:mod:`._live`), and the events of
the folds.

Nothing here folds, counts a budget or keeps a ledger: the tiered memory
(chatfold's Rust core) does. This module renders and reports; an edit of
the live state and sawtooth's hard-limit truncation rebuild the memory from
a state (the core has no other way to drop or rewrite turns)."""

from __future__ import annotations

import inspect
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ... import _chatfold
from ...errors import InvalidConfig, InvalidMessage
from ...memory import TieredMemory
from .config import ContextManagerConfig, OllamaConfig, Provider
from .events.bus import EventBus
from .events.types import (
    CompressionCycleCompleteEvent,
    CompressionCycleFailedEvent,
    CompressionCycleStartEvent,
    DTEFoldCreatedEvent,
    EntityAnchoredEvent,
    HardLimitReachedEvent,
    L1EvictionEvent,
    L2SummaryGeneratedEvent,
    SawtoothEvent,
    SoftLimitReachedEvent,
)
from .exceptions import NotSupportedError, TokenLimitExceededError
from ._live import LiveState
from .state import DTEState, MemoryState, check_entity_key, ledger_map, split_summary

# chatfold's summary message (the fold policy's default, `DEFAULT_SUMMARY_PREFIX` in the crate).
SUMMARY_PREFIX = "Summary of earlier conversation:\n"

ROLES = ("user", "assistant", "system", "tool")

# The tiered memory's counters a replaced memory hands on.
_CARRIED = ("folds_done", "folds_failed", "messages_folded", "messages_dropped", "results_cleared")

# sawtooth's confidence by an entity's strategy (in explain_prompt)
_CONFIDENCE = {
    "deterministic": "100% (Deterministic)",
    "salience_heuristic": "90% (Salience Heuristic)",
    "pinned": "100% (Pinned)",
    "llm_synthesis": "85% (LLM Synthesized)",
}

_CLOUD_URLS = {
    Provider.OPENAI: "https://api.openai.com/v1",
    Provider.ANTHROPIC: "https://api.anthropic.com",
    Provider.GEMINI: "https://generativelanguage.googleapis.com/v1beta/openai",
}


def extractive(request: Any) -> str:
    """chatfold's built-in extractive summary (no model): the DTE mode's folds."""
    return request._extractive()


def backend(config: ContextManagerConfig) -> Tuple[Any, str, str]:
    """The summarizer the configuration's backend names (run in Rust), its
    provider's name and its model."""
    cloud = config.cloud
    if cloud is not None:
        key = cloud.api_key.get_secret_value() if hasattr(cloud.api_key, "get_secret_value") else cloud.api_key
        provider = Provider(cloud.provider)
        url = cloud.base_url or _CLOUD_URLS[provider]
        make = _chatfold.AnthropicSummarizer if provider is Provider.ANTHROPIC else _chatfold.OpenAISummarizer
        return make(url, cloud.model, api_key=key, timeout=float(cloud.timeout_seconds)), provider.value, cloud.model
    ollama = config.ollama or OllamaConfig()
    model = config.background_model or ollama.model
    url = ollama.base_url.rstrip("/") + "/v1"
    return _chatfold.OpenAISummarizer(url, model, timeout=float(ollama.timeout_seconds)), "ollama", model


def tokenizer_for(model: str) -> str:
    """The tokenizer chatfold counts with: ``model``'s, or cl100k_base for a
    model tiktoken does not know (sawtooth's fallback)."""
    try:
        _chatfold.count_text("", model)
        return model
    except Exception:
        return "cl100k_base"


class Tiers(LiveState):
    """One sawtooth manager's chatfold side (its live state: :class:`~._live.LiveState`)."""

    def __init__(
        self,
        system_prompt: str,
        config: ContextManagerConfig,
        summarize: Optional[Callable[[Any], Any]],
        bus: Optional[EventBus],
        strict: bool = False,
    ) -> None:
        if not isinstance(system_prompt, str):
            raise InvalidConfig(f"system_prompt must be a string, got {type(system_prompt).__name__}")
        if not isinstance(config, ContextManagerConfig):
            raise InvalidConfig(f"config must be a ContextManagerConfig, got {type(config).__name__}")
        if config.enable_l3_semantic_storage:
            raise NotSupportedError("L3 semantic storage (enable_l3_semantic_storage)", "it needs pgvector and embeddings")
        if config.pool_id:
            raise NotSupportedError("multi-agent pools (pool_id)")
        if config.soft_limit_tokens < 1 or config.hard_limit_tokens < 1 or config.chunk_size < 1:
            raise InvalidConfig("soft_limit_tokens, hard_limit_tokens and chunk_size must be positive")
        if not isinstance(strict, bool):
            raise InvalidConfig(f"strict must be a bool, got {strict!r}")
        self.config = config
        # chatfold's stricter behaviour instead of sawtooth's (see ContextManager)
        self.strict = strict
        # the counters of memories an applied edit replaced (see core_stats)
        self.carried: Dict[str, int] = {key: 0 for key in _CARRIED}
        self.system_prompt = system_prompt
        self.tokenizer = tokenizer_for(config.tokenizer_model)
        if summarize is not None:
            self.summarize: Callable[[Any], Any] = summarize
            self.provider, self.model = "custom", getattr(summarize, "__name__", type(summarize).__name__)
        elif config.compression_mode == "dte":
            self.summarize, self.provider, self.model = extractive, "chatfold", "extractive"
        else:
            self.summarize, self.provider, self.model = backend(config)
        self.bus = bus
        self.cycles: Dict[int, Tuple[str, float, Dict[str, Any]]] = {}
        self.own_cycles: Set[str] = set()
        self.soft = self.hard = False
        self.main_prompt_tokens = 0
        self.prompt_key: Optional[Tuple[int, int]] = None
        self.dirty = False
        # called when a fold lands or fails, or L1 was truncated (the async
        # manager's monitor then releases its lock)
        self.fold_done: Optional[Callable[[], None]] = None
        self.pinned: Set[str] = set()  # the ledger's keys pin_entity put there
        self.memory = self._build(None)
        self._init_live()

    # -- the memory ----------------------------------------------------

    def _build(self, state: Optional[Mapping[str, Any]]) -> TieredMemory:
        c = self.config
        # sawtooth's section headings cost a few tokens more than the core's
        # own framing: the core keeps its view that much lower, so the
        # compiled prompt fits the hard limit.
        reserve = self.count_text("[SYSTEM_L0]\n\n\n[ARCHIVE_L2]\n\n\n[ENTITY_LEDGER_L1_5]\n")
        hard = max(c.hard_limit_tokens - reserve, 1)
        soft = min(c.soft_limit_tokens, hard)
        memory = TieredMemory(
            soft,
            hard,
            self.summarize,
            low_water=soft,  # sawtooth folds back under the soft limit only
            system=[{"role": "system", "content": self.system_prompt}] if self.system_prompt else [],
            tokenizer=self.tokenizer,
            chunk_size=c.chunk_size,
            fallback_truncate=c.fallback_truncate,
            state=state,
        )
        memory._observer = self
        return memory

    def restore(self, loaded: Any) -> None:
        """Replaces the (not yet started) memory with a state a storage
        adapter loaded (a :class:`MemoryState`, its dict, or sawtooth's)."""
        if loaded is None:
            return
        state = MemoryState.model_validate(loaded)
        self.system_prompt = state.l0_system.content
        restored = state._chatfold_state()
        restored.pop("system", None)
        self.memory = self._build(restored)
        self.generation += 1
        if self.live is not None:  # the loaded state wins over edits not yet applied
            self._refresh()

    def add(self, role: str, content: str) -> None:
        """Appends a turn (never waits for a fold); raises
        ``TokenLimitExceededError`` after storing it when L1 reached the hard
        limit and ``fallback_truncate`` is off (sawtooth's contract). A
        pending edit of the live state that cannot be applied is discarded
        and its ``ValueError`` raised after the turn is stored."""
        if role not in ROLES:
            error = InvalidMessage(f"role must be one of {list(ROLES)}, got {role!r}")
            error.field = "role"
            raise error
        if not isinstance(content, str):
            error = InvalidMessage(f"content must be a string, got {type(content).__name__}")
            error.field = "content"
            raise error
        refused: Optional[ValueError] = None
        try:
            self.sync()
        except ValueError as error:  # the edit is discarded; the turn is stored all the same
            refused = error
        message = {"role": role, "content": content, "id": str(uuid.uuid4())}
        self.memory.add_message(message)
        self.dirty = True
        self.follow(message, synced=True)
        s = self.memory.stats()
        l1 = s["buffer_tokens"]
        c = self.config
        if l1 >= c.soft_limit_tokens and not self.soft:
            self.emit(SoftLimitReachedEvent(current_tokens=l1, soft_limit=c.soft_limit_tokens, hard_limit=c.hard_limit_tokens))
        self.soft = l1 >= c.soft_limit_tokens
        if l1 >= c.hard_limit_tokens and not self.hard:
            self.emit(HardLimitReachedEvent(current_tokens=l1, soft_limit=c.soft_limit_tokens, hard_limit=c.hard_limit_tokens))
        self.hard = l1 >= c.hard_limit_tokens
        # sawtooth's truncation when the worker has not caught up; not while a
        # fold is under way (rebuilding the memory would abandon it, and its
        # landing shrinks L1: the prompt keeps within the hard limit meanwhile)
        truncate = c.fallback_truncate and not self.strict and c.compression_mode == "always_llm"
        if self.hard and truncate and not s["fold_in_flight"]:
            self.truncate_oldest()
        if refused is not None:
            raise refused
        if self.hard and not c.fallback_truncate:
            raise TokenLimitExceededError(
                f"Working Memory exceeded hard limit of {c.hard_limit_tokens} tokens and fallback_truncate is disabled."
            )

    def fold_due(self) -> bool:
        """Whether the core has a fold due."""
        return bool(self.memory.stats()["folds_pending"])

    def fold_inline(self) -> bool:
        """Folds what is due now on this thread (the sync manager); a
        summarizer's failure is recorded, not raised. ``True``: no failure."""
        step = self.memory._m._begin_fold_now()
        landed: Optional[Tuple[Any, bool, Any]] = None
        ok = True
        while True:
            request = step.poll()
            if landed is not None:
                self.fold_finished(*landed)
                landed = None
            if request is None:
                if not step.done():  # cannot happen without a worker task; never spin
                    step.cancel()
                    return ok
                try:
                    step.result()
                except Exception:
                    ok = False
                return ok
            self.fold_started(request)
            try:
                answer = self.summarize(request)
                if inspect.isawaitable(answer):
                    answer = _run(answer)
            except Exception as error:
                step.fail(error)
                landed = (request, False, error)
                ok = False
            except BaseException:
                step.cancel()
                raise
            else:
                step.answer(answer)
                landed = (request, True, answer)

    def pin(self, key: str, value: str) -> None:
        """sawtooth's ``pin_entity``: ``key: value`` into the ledger now."""
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str) or not value.strip():
            raise ValueError("pin_entity needs a non-empty key and value (strings)")
        check_entity_key(key)
        if "\n" in value or "\r" in value:
            raise ValueError(f"pin_entity: the value of {key!r} cannot span lines")
        was_pinned = key in self.pinned
        self.pinned.add(key)
        try:
            self.live_state().l1_5_entities.upsert({key: value})
            self.sync()
        except BaseException:
            if not was_pinned:
                self.pinned.discard(key)
            raise

    # -- reading -------------------------------------------------------

    def parts(self) -> Tuple[str, List[str]]:
        """The summary's narrative and ledger entries."""
        return split_summary(self.memory.summary)

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` with the manager's tokenizer."""
        return _chatfold.count_text(text, self.tokenizer)

    def count_messages(self, messages: List[Mapping[str, Any]]) -> int:
        """Tokens of ``messages`` each (the list's reply priming left out)."""
        if not messages:
            return 0
        return max(_chatfold.count_tokens(list(messages), self.tokenizer) - 3, 0)

    def prompt(self) -> List[Dict[str, Any]]:
        """sawtooth's layout (one system message: ``[SYSTEM_L0]``,
        ``[ARCHIVE_L2]``, ``[ENTITY_LEDGER_L1_5]``; then L1 verbatim) over
        the core's view, never more than the hard limit."""
        self.sync()
        view = self.memory.messages()
        pinned = 1 if self.system_prompt else 0
        rest = view[pinned:]
        # the summary, when the core's view holds it
        narrative: str = ""
        entries: List[str] = []
        first = str(rest[0].get("content") or "") if rest else ""
        if self.memory.summary and rest[0].get("role") == "system" and first.startswith(SUMMARY_PREFIX):
            narrative, entries = split_summary(first[len(SUMMARY_PREFIX):])
            rest = rest[1:]
        blocks = [f"[SYSTEM_L0]\n{self.system_prompt}"]
        if narrative:
            blocks.append(f"[ARCHIVE_L2]\n{narrative}")
        if entries:
            blocks.append("[ENTITY_LEDGER_L1_5]\n" + "\n".join(f"- {e}" for e in entries))
        head: Dict[str, Any] = {"role": "system", "content": "\n\n".join(blocks)}
        turns = [{"role": m["role"], "content": m.get("content") or ""} for m in rest]
        limit = self.config.hard_limit_tokens
        prompt: List[Mapping[str, Any]] = [head, *turns]
        total = _chatfold.count_tokens(prompt, self.tokenizer)
        if total > limit:
            # The oldest turns leave the prompt, not the state: each counted
            # once (a list counts as its priming and its messages).
            priming = _chatfold.count_tokens([], self.tokenizer)
            drop = 0
            while drop < len(turns) - 1 and total > limit:
                total -= _chatfold.count_tokens([turns[drop]], self.tokenizer) - priming
                drop += 1
            prompt = [head, *turns[drop:]]
        if _chatfold.count_tokens(prompt, self.tokenizer) > limit:
            # The core's own layout, which it keeps within the limit when it can.
            prompt = [{"role": m["role"], "content": m.get("content") or ""} for m in view]
        tokens = _chatfold.count_tokens(prompt, self.tokenizer)
        stats = self.memory.stats()
        key = (stats["buffer_messages"], stats["folds_done"])
        if key != self.prompt_key:
            self.main_prompt_tokens += tokens
            self.prompt_key = key
            self.update_dte(stats)
        return [dict(m) for m in prompt]

    def core_stats(self) -> Dict[str, Any]:
        """The tiered memory's stats, its counters including those of the
        memories an applied edit or a hard truncation replaced."""
        s = self.memory.stats()
        for key, value in self.carried.items():
            s[key] += value
        return s

    def carry(self, old: Mapping[str, Any]) -> None:
        """Keeps a replaced memory's counters."""
        for key in _CARRIED:
            self.carried[key] += int(old.get(key, 0))

    def stats(self) -> Dict[str, Any]:
        """sawtooth's stats keys (the managers add ``worker`` or ``compression``)."""
        self.sync()
        s = self.core_stats()
        narrative, entries = self.parts()
        ledger = ledger_map(entries)
        dte = self.dte(s).model_dump()
        dte.update(mode=self.config.compression_mode, background_spend_ratio_actual=0.0, observation_cache_entries=0)
        return {
            "l0_tokens": self.count_text(self.system_prompt),
            "l1_tokens": s["buffer_tokens"],
            "l1_message_count": s["buffer_messages"],
            "l1_5_entity_count": len(ledger),
            "l2_tokens": self.count_text(narrative),
            "l3_chunk_count": 0,
            "l3_enabled": False,
            "l3_retrieved_chunk_count": 0,
            "dte": dte,
            "chatfold": s,
        }

    def dte(self, s: Mapping[str, Any]) -> DTEState:
        """sawtooth's DTE counts from the memory's stats ``s``: the prompt
        tokens built so far, and in ``"dte"`` mode the folds done."""
        folds = s["folds_done"] if self.config.compression_mode == "dte" else 0
        return DTEState(main_prompt_tokens=self.main_prompt_tokens, fold_cycles=folds)

    def explain(self, lineage: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
        """sawtooth's ``explain_prompt`` trace; ``lineage``: each ledger
        key's last journalled event (``operation``, ``timestamp``,
        ``strategy``), which the async manager reads from its journal."""
        live = self.live_state()
        narrative = live.l2_archival.narrative
        entities = []
        for key, values in live.l1_5_entities.entities.items():
            strategy = "pinned" if key in self.pinned else "deterministic"
            history = dict(lineage.get(key) or {}) if lineage else {}
            operation = history.get("operation", "unknown")
            strategy = history.get("strategy") or strategy
            entities.append(
                {
                    "prompt_component": "[ENTITY_LEDGER_L1_5]",
                    "entity_key": key,
                    "entity_value": values,
                    "origin": f"Anchored via explicit tracking engine (Operation: {operation}) [Strategy: {strategy}]",
                    "timestamp": history.get("timestamp", "unknown"),
                    "confidence": _CONFIDENCE.get(strategy, "100% (Deterministic)"),
                }
            )
        return {
            "l0_system": {"content": self.system_prompt, "origin": "Hardcoded System Initialization"},
            # sawtooth's origin for L2, whichever backend folds
            "l2_archival": {"content": narrative, "origin": "Background Ollama Compression (L1 -> L2)"},
            "l1_5_entities": entities,
            "l1_working_messages": self.memory.stats()["buffer_messages"],
            "l3_semantic": {
                "chunk_count": 0,
                "last_indexed_at": None,
                "origin": "not supported by chatfold",
                "in_prompt": False,
                "retrieved_chunks": [],
            },
        }

    # -- events --------------------------------------------------------

    def emit(self, event: SawtoothEvent) -> None:
        """Sends ``event`` on the manager's bus (none: dropped), marking a
        completed cycle and a ledger change as this manager's, for its journal."""
        if self.bus is not None:
            if isinstance(event, CompressionCycleCompleteEvent) and event.cycle_id:
                self.own_cycles.add(event.cycle_id)  # the journal's, until written
            if isinstance(event, EntityAnchoredEvent):
                self.own_cycles.add(event.event_id)  # the journal's too
                setattr(event, "strategy", "pinned" if event.entity_key in self.pinned else "deterministic")
            self.bus.emit_nowait(event)

    def fold_started(self, request: Any) -> None:
        """The core asked for a summary: a compression cycle starts."""
        cycle = str(uuid.uuid4())
        s = self.memory.stats()
        before = {"dropped": s["messages_dropped"], "ledger": ledger_map(self.parts()[1]), "l1": s["buffer_tokens"]}
        self.cycles[id(request)] = (cycle, time.monotonic(), before)
        self.emit(CompressionCycleStartEvent(cycle_id=cycle, current_l1_tokens=s["buffer_tokens"], chunk_size=self.config.chunk_size))

    def fold_finished(self, request: Any, ok: bool, outcome: Any) -> None:
        """The fold landed (``ok``) or failed: the events of what happened."""
        cycle, started, before = self.cycles.pop(id(request), (str(uuid.uuid4()), time.monotonic(), {}))
        self.follow()
        if self.fold_done is not None:
            self.fold_done()
        ms = int((time.monotonic() - started) * 1000)
        s = self.memory.stats()
        self.dirty = True
        self.soft = s["buffer_tokens"] >= self.config.soft_limit_tokens
        self.hard = s["buffer_tokens"] >= self.config.hard_limit_tokens
        dropped = s["messages_dropped"] - before.get("dropped", s["messages_dropped"])
        if dropped > 0:
            self.emit(
                L1EvictionEvent(
                    cycle_id=cycle,
                    messages_evicted=dropped,
                    tokens_remaining_l1=s["buffer_tokens"],
                    trigger="hard_limit_forced",
                )
            )
        if not ok:
            self.emit(
                CompressionCycleFailedEvent(
                    cycle_id=cycle,
                    error_type=type(outcome).__name__,
                    error_message=str(outcome),
                    fallback_triggered=dropped > 0,
                )
            )
            return
        folded = list(request.messages)
        tokens = self.count_messages(folded)
        narrative, entries = self.parts()
        ledger = ledger_map(entries)
        self.emit(
            L1EvictionEvent(
                cycle_id=cycle,
                tokens_evicted=tokens,
                messages_evicted=len(folded),
                tokens_remaining_l1=s["buffer_tokens"],
                evicted_message_ids=[str(m["id"]) for m in folded if m.get("id")],
                trigger="soft_limit_exceeded",
            )
        )
        old = before.get("ledger", {})
        for key, values in ledger.items():
            if key not in old:
                self.emit(EntityAnchoredEvent(entity_key=key, entity_value=values[-1], operation="insert"))
            elif old[key] != values:
                self.emit(EntityAnchoredEvent(entity_key=key, entity_value=values[-1], operation="update"))
        for key, values in old.items():
            if key not in ledger:
                self.emit(EntityAnchoredEvent(entity_key=key, entity_value=values[-1], operation="delete"))
        self.emit_landed(cycle, folded, tokens, narrative, ledger, s["buffer_tokens"], ms)

    def emit_landed(
        self,
        cycle: str,
        folded: List[Dict[str, Any]],
        tokens: int,
        narrative: str,
        ledger: Dict[str, List[str]],
        l1_tokens: int,
        ms: int,
    ) -> None:
        """A landed fold's last events, as sawtooth sends them: in DTE mode
        ``DTEFoldCreatedEvent`` alone (no summary, no completed cycle:
        nothing journalled), else ``L2SummaryGeneratedEvent`` and
        ``CompressionCycleCompleteEvent``."""
        if self.config.compression_mode == "dte":
            self.emit(
                DTEFoldCreatedEvent(
                    cycle_id=cycle,
                    messages_folded=len(folded),
                    tokens_evicted=tokens,
                    entity_keys=sorted(ledger),
                )
            )
            return
        compressed = self.count_text(narrative)
        self.emit(
            L2SummaryGeneratedEvent(
                cycle_id=cycle,
                summary_text=narrative,
                compressed_message_count=len(folded),
                original_tokens=tokens,
                compressed_tokens=compressed,
                compression_ratio=tokens / max(compressed, 1),
                provider=self.provider,
                model=self.model,
                compression_duration_ms=ms,
            )
        )
        self.emit(
            CompressionCycleCompleteEvent(
                cycle_id=cycle,
                l1_tokens_evicted=tokens,
                l1_5_entities_retained={k: v[-1] for k, v in ledger.items()},
                l2_summary_generated=narrative,
                messages_compressed=len(folded),
                final_l1_tokens=l1_tokens,
                total_duration_ms=ms,
            )
        )


def _run(awaitable: Any) -> Any:
    """An async summarizer's answer awaited from sync code (no loop running here)."""
    import asyncio

    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())
