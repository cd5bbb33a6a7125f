"""sawtooth's compression cycle of the turns chatfold's core does not fold
(the latest turn), for the async manager in sawtooth's (non-strict) mode.

When a cycle is queued while L1 is past the soft limit and the core has
no fold due nor in flight (it never folds the latest turn), sawtooth's
cycle takes L1's oldest ``chunk_size`` turns at once, the latest included.
Here, as there, the cycle's ``CompressionCycleStartEvent`` and its
``L1EvictionEvent`` (``trigger="soft_limit_exceeded"``) are sent when it is
queued; the turns are then folded in the background by the core's own fold
(a memory of their own, holding the summary and those turns, folds them
with the manager's summarizer: chatfold's extractive fold in ``"dte"``
mode, the backend or ``summarize`` else), and the summary it gives replaces
the memory's, the turns leaving L1. A fold that fails, is cancelled, or is
overtaken (the summary or those turns changed meanwhile, or an edit of
the live state is pending) changes nothing:
the turns stay in L1 for the core to fold later, and the cycle is reported
failed."""

from __future__ import annotations

import time
from typing import Any, Dict, List

from ...memory import TieredMemory
from .events.types import CompressionCycleFailedEvent, CompressionCycleStartEvent, L1EvictionEvent
from ._live import _signature
from .state import Message, ledger_map, split_summary

# The turn after the cycle's turns in the memory that folds them: the core
# never folds the latest turn, so this one stays and the cycle's are folded.
_SENTINEL = {"role": "user", "content": ".", "id": "chatfold-sawtooth-latest-cycle"}


def latest_cycle_due(tiers: Any) -> bool:
    """Whether a cycle queued now would take turns the core does not fold:
    sawtooth's mode, L1 past the soft limit, no fold due nor in flight."""
    if tiers.strict:
        return False
    s = tiers.memory.stats()
    return (
        s["buffer_messages"] > 0
        and s["buffer_tokens"] >= tiers.config.soft_limit_tokens
        and not s["folds_pending"]
        and not s["fold_in_flight"]
    )


def start_latest_cycle(tiers: Any, chunk: List[Message], cycle: str) -> None:
    """The queued cycle's events, as sawtooth sends them when it queues one."""
    s = tiers.memory.stats()
    tiers.emit(CompressionCycleStartEvent(cycle_id=cycle, current_l1_tokens=s["buffer_tokens"], chunk_size=tiers.config.chunk_size))
    tokens = sum(m.token_count for m in chunk)
    tiers.emit(
        L1EvictionEvent(
            cycle_id=cycle,
            tokens_evicted=tokens,
            messages_evicted=len(chunk),
            tokens_remaining_l1=max(s["buffer_tokens"] - tokens, 0),
            evicted_message_ids=[m.id for m in chunk],
            trigger="soft_limit_exceeded",
        )
    )


async def fold_latest(tiers: Any, chunk: List[Message], cycle: str) -> None:
    """Folds ``chunk`` (see the module's text) and reports the cycle."""
    started = time.monotonic()
    try:
        await _fold(tiers, chunk, cycle, started)
    except Exception as error:  # a background task: reported, never raised
        _failed(tiers, cycle, error)
    except BaseException as error:  # cancelled: the manager stops
        _failed(tiers, cycle, error)
        raise
    finally:
        if tiers.fold_done is not None:
            tiers.fold_done()


async def _fold(tiers: Any, chunk: List[Message], cycle: str, started: float) -> None:
    summary = tiers.memory.summary
    turns = [{"role": m.role, "content": m.content, "id": m.id} for m in chunk]
    reserve = tiers.count_text("[SYSTEM_L0]\n\n\n[ARCHIVE_L2]\n\n\n[ENTITY_LEDGER_L1_5]\n")
    own = TieredMemory(
        1,
        max(tiers.config.hard_limit_tokens - reserve, 2),
        tiers.summarize,
        tokenizer=tiers.tokenizer,
        chunk_size=max(len(turns), 1),
        state={"version": 2, "summary": summary, "buffer": [*turns, _SENTINEL]},
    )
    try:
        await own.fold_now()
    except Exception as error:
        _failed(tiers, cycle, error)
        return
    left = {str(m.get("id") or "") for m in own.buffer}
    folded = [t for t in turns if t["id"] not in left]
    with tiers.lock:
        _apply_fold(tiers, cycle, summary, folded, own, started)


def _apply_fold(tiers: Any, cycle: str, summary: str, folded: List[Dict[str, Any]], own: Any, started: float) -> None:
    """The folded turns out of L1 and ``own``'s summary in place of
    ``summary`` (the memory's when the fold began), unless overtaken."""
    live = tiers.live
    if live is None or _signature(live) != tiers.live_sig:
        # the caller's pending edit is the caller's to apply (and to see refused)
        _failed(tiers, cycle, None)
        return
    tiers.sync()
    now = {m.id: m for m in live.l1_working.messages}
    if (
        not folded
        or tiers.memory.summary != summary
        or any(t["id"] not in now or now[t["id"]].content != t["content"] for t in folded)
    ):
        _failed(tiers, cycle, None)
        return
    narrative, entries = split_summary(own.summary)
    gone = {t["id"] for t in folded}
    live.l1_working.messages = [m for m in live.l1_working.messages if m.id not in gone]
    live.l2_archival.narrative = narrative
    live.l1_5_entities.entities = ledger_map(entries)
    tiers.sync()
    s = own.stats()
    tiers.carried["folds_done"] += s["folds_done"]
    tiers.carried["messages_folded"] += s["messages_folded"]
    _landed(tiers, cycle, folded, narrative, entries, started)


def _landed(tiers: Any, cycle: str, folded: List[Dict[str, Any]], narrative: str, entries: List[str], started: float) -> None:
    """The cycle's landing events, as a fold of the core's sends them."""
    tokens = tiers.count_messages(folded)
    l1 = tiers.memory.stats()["buffer_tokens"]
    ms = int((time.monotonic() - started) * 1000)
    tiers.emit_landed(cycle, folded, tokens, narrative, ledger_map(entries), l1, ms)


def _failed(tiers: Any, cycle: str, error: Any) -> None:
    """The cycle's failure: its turns stay in L1 (the core folds them later)."""
    if error is None:
        kind, text = "FoldOvertaken", "the summary or the cycle's turns changed meanwhile; the core folds them later"
    elif isinstance(error, Exception):
        kind, text = type(error).__name__, str(error)
    else:
        kind, text = "FoldAbandoned", "the manager stopped; the core folds the turns later"
    tiers.emit(CompressionCycleFailedEvent(cycle_id=cycle, error_type=kind, error_message=text, fallback_triggered=False))
