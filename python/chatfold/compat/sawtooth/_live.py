"""The live :class:`~.state.MemoryState` a sawtooth manager's ``state``
returns: one object per manager that follows chatfold's memory and whose
edits reach it.

On every read or write of the manager, :meth:`LiveState.sync` first applies
the edits made to the live object since it last followed the memory (a
tier compared with what the memory gave it), then refreshes it from the
memory when that changed. Applying rebuilds the tiered memory from a state
made of the edited tiers and the memory's current other tiers (a fold that
landed meanwhile is kept, unless its tier was edited too); a running
worker is handed over to the new memory (a fold in flight is abandoned and
done again: nothing lost). An edit that cannot be applied raises
``ValueError`` and is discarded: the memory is unchanged."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional

from .events.types import EntityAnchoredEvent, L1EvictionEvent
from .state import (
    ArchivalMemory,
    EntityLedger,
    MemoryState,
    Message,
    SystemPrompt,
    ledger_summary,
    tiers_to_chatfold,
)

_COMPARED = {"l0_system", "l1_working", "l1_5_entities", "l2_archival"}


class LiveState:
    """The live state's part of a manager's chatfold side (mixed into
    :class:`~._core.Tiers`, which provides ``memory``, ``_build``, the
    counters and the events)."""

    memory: Any
    config: Any
    carried: Dict[str, int]
    hard: bool
    fold_done: Any
    system_prompt: str
    bus: Any
    cycles: Dict[int, Any]
    dirty: bool

    def _init_live(self) -> None:
        self.live: Optional[MemoryState] = None
        self.live_dump: Optional[Dict[str, Any]] = None
        self.live_memory: Optional[Dict[str, Any]] = None

    # -- reading ------------------------------------------------------

    def live_state(self) -> MemoryState:
        """The live state, in step with the memory."""
        self.sync()
        assert self.live is not None
        return self.live

    def snapshot(self) -> MemoryState:
        """A copy of the live state with ``chatfold`` (the memory's own
        state), for storage (made from its dump: the ledger's callback is not copied)."""
        data = self.live_state().model_dump(mode="json")
        data["chatfold"] = self.memory.to_dict()
        return MemoryState.model_validate(data)

    def sync(self) -> None:
        """Applies the live state's edits to the memory (``ValueError``:
        they could not be, and were discarded), then refreshes it from the memory."""
        live = self.live
        if live is not None:
            dump = _dump(live)
            if dump != self.live_dump:
                try:
                    self._apply(live, dump)
                except Exception as error:
                    self.live_memory = None  # the refresh below discards the edit
                    self._refresh()
                    raise ValueError(
                        f"the edited MemoryState could not be applied ({error}); "
                        "the edit was discarded and the memory is unchanged"
                    ) from error
        if self.live is None or self.memory.to_dict() != self.live_memory:
            self._refresh()

    def follow(self) -> None:
        """Refreshes the live state from the memory after the memory
        changed (a turn added, a fold landed), unless edits are pending
        (the next :meth:`sync` applies them first)."""
        if self.live is not None and _dump(self.live) == self.live_dump:
            self._refresh()

    def _refresh(self) -> None:
        current = self.memory.to_dict()
        s = self.memory.stats()
        narrative, entries = self.parts()  # type: ignore[attr-defined]
        previous = self.live.l1_working.messages if self.live is not None else []
        stamps = {m.id: m.timestamp for m in previous if isinstance(m, Message)}
        now = datetime.now(timezone.utc)
        messages: List[Message] = []
        for m in self.memory.buffer:
            ident = str(m.get("id") or "")
            messages.append(
                Message.model_construct(
                    id=ident,
                    role=m["role"],
                    content=m.get("content") or "",
                    timestamp=stamps.get(ident, now),
                    token_count=self.count_messages([m]),  # type: ignore[attr-defined]
                )
            )
        from ._core import ledger_map

        entities = ledger_map(entries)
        system = self.system_prompt
        live = self.live
        if live is None:
            live = MemoryState(l0_system=SystemPrompt(content=system))
            if self.bus is not None:
                live.l1_5_entities.set_event_callback(self._ledger_changed)
            self.live = live
        live.l0_system.content = system
        live.l0_system.token_count = self.count_text(system)  # type: ignore[attr-defined]
        live.l1_working.messages = messages
        live.l1_working.token_count = s["buffer_tokens"]
        live.l1_5_entities.entities = entities
        live.l2_archival.narrative = narrative
        live.l2_archival.token_count = self.count_text(narrative)  # type: ignore[attr-defined]
        live.dte = self.dte(s)  # type: ignore[attr-defined]
        self.live_dump = _dump(live)
        self.live_memory = current

    # -- applying edits -----------------------------------------------

    def _apply(self, live: MemoryState, dump: Dict[str, Any]) -> None:
        old = self.live_dump or {}
        current = self.memory.to_dict()
        narrative, entries = self.parts()  # type: ignore[attr-defined]
        from ._core import ledger_map

        if dump.get("l1_working") != old.get("l1_working"):
            buffer = tiers_to_chatfold(live.l1_working, EntityLedger(), ArchivalMemory())["buffer"]
        else:
            buffer = current.get("buffer", [])
        if dump.get("l1_5_entities") != old.get("l1_5_entities"):
            ledger = _checked_ledger(live.l1_5_entities.entities)
        else:
            ledger = EntityLedger(entities=ledger_map(entries))
        if dump.get("l2_archival", {}).get("narrative") != old.get("l2_archival", {}).get("narrative"):
            if not isinstance(live.l2_archival.narrative, str):
                raise TypeError("l2_archival.narrative must be a string")
            narrative = live.l2_archival.narrative
        system = self.system_prompt
        if dump.get("l0_system") != old.get("l0_system"):
            if not isinstance(live.l0_system.content, str):
                raise TypeError("l0_system.content must be a string")
            system = live.l0_system.content
        state = {"version": 2, "summary": ledger_summary(narrative, ledger), "buffer": buffer}
        previous_system, self.system_prompt = self.system_prompt, system
        try:
            memory = self._build(state)  # type: ignore[attr-defined]
        except BaseException:
            self.system_prompt = previous_system
            raise
        old_memory, self.memory = self.memory, memory
        self.carry(old_memory.stats())  # type: ignore[attr-defined]
        self.dirty = True
        self.cycles.clear()
        _hand_over(old_memory, memory)

    def truncate_oldest(self) -> int:
        """sawtooth's hard-limit fallback (``fallback_truncate`` in
        ``"always_llm"`` mode): the oldest ``chunk_size`` turns leave L1 at
        once (the latest turn always stays), and L2 notes how many; an
        ``L1EvictionEvent`` (``trigger="hard_limit_forced"``) reports them.
        Returns how many were dropped."""
        live = self.live_state()
        keep = max(len(live.l1_working.messages) - 1, 0)
        count = min(self.config.chunk_size, keep)  # type: ignore[attr-defined]
        if count == 0:
            return 0
        chunk = live.l1_working.slice_oldest(count)
        live.l2_archival.append_narrative(
            f"[HARD TRUNCATION: {count} messages dropped because the compression worker has not yet caught up.]"
        )
        self.sync()
        self.carried["messages_dropped"] += count  # type: ignore[attr-defined]
        s = self.memory.stats()
        self.hard = s["buffer_tokens"] >= self.config.hard_limit_tokens  # type: ignore[attr-defined]
        self.emit(  # type: ignore[attr-defined]
            L1EvictionEvent(
                cycle_id=f"hard-truncate-{uuid.uuid4()}",
                tokens_evicted=sum(m.token_count for m in chunk),
                messages_evicted=count,
                tokens_remaining_l1=s["buffer_tokens"],
                evicted_message_ids=[m.id for m in chunk],
                trigger="hard_limit_forced",
            )
        )
        if self.fold_done is not None:  # as sawtooth's truncation, a fresh cycle may be queued
            self.fold_done()
        return count

    def _ledger_changed(self, key: str, value: str, operation: str) -> None:
        """The live ledger's callback: sawtooth's ``EntityAnchoredEvent``."""
        self.emit(EntityAnchoredEvent(entity_key=key, entity_value=value, operation=operation))  # type: ignore[attr-defined]


def _dump(state: MemoryState) -> Dict[str, Any]:
    return state.model_dump(mode="json", include=_COMPARED, warnings=False)


def _checked_ledger(entities: Any) -> EntityLedger:
    if not isinstance(entities, Mapping):
        raise TypeError("l1_5_entities.entities must be a dict of key -> [values]")
    checked: Dict[str, List[str]] = {}
    for key, values in entities.items():
        if not isinstance(key, str) or not key.strip():
            raise TypeError(f"an entity key must be a non-empty string, got {key!r}")
        if isinstance(values, str) or not isinstance(values, (list, tuple)):
            raise TypeError(f"entity {key!r} must map to a list of values, got {type(values).__name__}")
        clean = [str(v) for v in values if str(v).strip()]
        if any("\n" in v for v in clean) or "\n" in key:
            raise ValueError(f"entity {key!r}: a key or value cannot span lines")
        if clean:
            checked[key] = clean
    return EntityLedger(entities=checked)


def _hand_over(old: Any, new: Any) -> None:
    """Stops ``old``'s worker (without waiting) and starts ``new``'s on the same loop."""
    task = getattr(old, "_task", None)
    if task is None:
        return
    old._observer = None
    loop = task.get_loop()
    task.cancel()
    old._task = None
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        new.start()
    else:
        loop.call_soon_threadsafe(new.start)
