"""The live :class:`~.state.MemoryState` a sawtooth manager's ``state``
returns: one object per manager that follows chatfold's memory and whose
edits reach it.

On every read or write of the manager, :meth:`LiveState.sync` first applies
the edits made to the live object since it last followed the memory (a
tier compared with what the memory gave it), then refreshes it from the
memory when that changed. Applying rebuilds the tiered memory from a state
made of the edited tiers and the memory's current other tiers. When a fold
landed meanwhile, each edited tier is merged with it three ways, as
sawtooth's worker merges into the same object: L1 by message id (the
folded turns stay folded, a text edit or a new turn is kept), L1.5 by key,
L2 the text the edit appended after the fold's narrative. An edit that
cannot be merged so (it rewrote the narrative, or changed or removed a
turn the fold took with its old text) is applied to the state it started
from instead: the fold that landed meanwhile is dropped (its events were
sent; the counters leave it out) and its turns are folded again from the
edited state (when the next turn is added, as the core folds what is
due), so neither the edit nor a turn is lost and the summary
never keeps a turn's text the caller replaced. A running worker is handed
over to the new memory (a fold in flight is abandoned, its cycle reported
failed, and done again: nothing lost). An edit that cannot be applied at
all (a value of the wrong type, a ledger key chatfold cannot hold) raises
``ValueError`` and is discarded: the memory is unchanged."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .events.types import CompressionCycleFailedEvent, EntityAnchoredEvent
from .state import (
    ArchivalMemory,
    DTEState,
    EntityLedger,
    check_entity_key,
    MemoryState,
    Message,
    SystemPrompt,
    ledger_map,
    ledger_summary,
    tiers_to_chatfold,
)


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
        # what the live state was when it last followed the memory, and
        # the memory's counters then (see _signature and _memory_key)
        self.live_sig: Optional[Dict[str, Any]] = None
        self.live_key: Optional[Tuple[int, ...]] = None
        self.live_stats: Optional[Mapping[str, Any]] = None  # the memory's stats then
        self.generation = 0  # bumped each time an edit rebuilds the memory
        self.token_cache: Dict[str, Tuple[str, int]] = {}
        # set by the sync wrapper, whose caller edits the live state from
        # another thread: a landing fold then leaves the live object alone
        # (the next call, on the wrapper's loop while the caller waits, syncs it)
        self.threaded = False
        # held while the live object is compared with, applied to or
        # refreshed from the memory, so that two threads never interleave there
        self.lock = threading.RLock()

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
        with self.lock:
            self._sync()

    def _sync(self) -> None:
        live = self.live
        if live is not None:
            sig = _signature(live)
            if sig != self.live_sig:
                try:
                    self._apply(live, sig)
                except Exception as error:
                    self._refresh()  # discards the edit
                    raise ValueError(
                        f"the edited MemoryState could not be applied ({error}); "
                        "the edit was discarded and the memory is unchanged"
                    ) from error
                self._refresh()
                return
        if self.live is None or self._memory_key() != self.live_key:
            self._refresh()
        else:
            self.update_dte(self.memory.stats())

    def sync_for_close(self) -> Optional[ValueError]:
        """:meth:`sync` for a manager that closes: an edit that cannot be
        applied is discarded and its ``ValueError`` returned, to be raised
        once the manager has saved the memory as it is and shut down."""
        try:
            self.sync()
        except ValueError as error:
            return error
        return None

    def update_dte(self, s: Mapping[str, Any]) -> None:
        """The live state's DTE counts brought up to date (in place)."""
        if self.live is None:
            return
        fresh = self.dte(s)  # type: ignore[attr-defined]
        dte = self.live.dte
        if not isinstance(dte, DTEState):
            self.live.dte = fresh
            return
        dte.main_prompt_tokens = fresh.main_prompt_tokens
        dte.fold_cycles = fresh.fold_cycles

    def follow(self, added: Optional[Mapping[str, Any]] = None, *, synced: bool = False) -> None:
        """Brings the live state up to the memory after the memory changed
        (``added``: the one turn just appended; else a fold landed), unless
        edits are pending (the next :meth:`sync` merges them with the
        memory's changes) or, for a fold, the state is shared with another
        thread (``threaded``: the next :meth:`sync` refreshes it);
        ``synced``: the caller ran :meth:`sync` just before, so none are."""
        with self.lock:
            self._follow(added, synced)

    def _follow(self, added: Optional[Mapping[str, Any]], synced: bool) -> None:
        live = self.live
        if live is None or (added is None and self.threaded):
            return
        if not synced and _signature(live) != self.live_sig:
            return
        key = self._memory_key()
        old = self.live_key
        one_more = (
            added is not None
            and old is not None
            and key[0] == old[0]
            and key[1] == old[1] + 1
            and key[3:-2] == old[3:-2]
            and key[-1] == old[-1]
        )
        if not one_more:
            self._refresh()
            return
        assert added is not None and self.live_sig is not None
        message = self._message(added, datetime.now(timezone.utc))
        live.l1_working.messages.append(message)
        live.l1_working.token_count = key[2]
        self.live_sig["l1_working"].append(_entry(message))
        self.live_key = key
        self.live_stats = self.memory.stats()

    def _memory_key(self) -> Tuple[int, ...]:
        """The memory's generation and counters: they change whenever its
        buffer or summary does (a turn added, folded, dropped or cleared)."""
        s = self.memory.stats()
        return (
            self.generation,
            s["buffer_messages"] + s["messages_folded"] + s["messages_dropped"],
            s["buffer_tokens"],
            s["folds_done"],
            s["folds_failed"],
            s["results_cleared"],
            s["buffer_messages"],
            s["summary_tokens"],
        )

    def _message(self, m: Mapping[str, Any], stamp: datetime) -> Message:
        ident = str(m.get("id") or "")
        content = m.get("content") or ""
        cached = self.token_cache.get(ident)
        if cached is not None and cached[0] == content:
            tokens = cached[1]
        else:
            tokens = self.count_messages([m])  # type: ignore[attr-defined]
            self.token_cache[ident] = (content, tokens)
        return Message.model_construct(id=ident, role=m["role"], content=content, timestamp=stamp, token_count=tokens)

    def _refresh(self) -> None:
        with self.lock:
            self._refresh_now()

    def _refresh_now(self) -> None:
        key = self._memory_key()
        s = self.memory.stats()
        narrative, entries = self.parts()  # type: ignore[attr-defined]
        previous = self.live.l1_working.messages if self.live is not None else []
        stamps = {m.id: m.timestamp for m in previous if isinstance(m, Message)}
        now = datetime.now(timezone.utc)
        buffer = self.memory.buffer
        messages = [self._message(m, stamps.get(str(m.get("id") or ""), now)) for m in buffer]
        ids = {m.id for m in messages}
        self.token_cache = {k: v for k, v in self.token_cache.items() if k in ids}
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
        self.update_dte(s)
        self.live_sig = _signature(live)
        self.live_key = key
        self.live_stats = s

    # -- applying edits -----------------------------------------------

    def _apply(self, live: MemoryState, sig: Dict[str, Any]) -> None:
        """Rebuilds the memory from the edited tiers and its current other
        tiers. When the memory moved on since the live state last followed
        it (a fold landed), each edited tier is merged three ways: L1 by
        message id (the turns folded meanwhile stay folded), L1.5 by key,
        L2's text appended to the current narrative. When the edit cannot
        be merged so (it rewrote the narrative, or changed or removed a turn
        the fold took), the memory is rebuilt from the state the edit started
        from with the edit applied, less the fold that landed meanwhile: its
        turns are folded again from the edited state when the next turn
        comes (nothing is lost)."""
        old = self.live_sig or {}
        current = self.memory.to_dict()
        narrative, entries = self.parts()  # type: ignore[attr-defined]
        current_ledger = ledger_map(entries)
        buffer = current.get("buffer", [])
        base_turns = old.get("l1_working") or []
        base_narrative = old.get("l2_archival")
        base_narrative = base_narrative if isinstance(base_narrative, str) else ""
        l1_edited = sig.get("l1_working") != old.get("l1_working")
        l2_edited = sig.get("l2_archival") != old.get("l2_archival")
        edited_turns = tiers_to_chatfold(live.l1_working, EntityLedger(), ArchivalMemory())["buffer"] if l1_edited else None
        if l2_edited and not isinstance(live.l2_archival.narrative, str):
            raise TypeError("l2_archival.narrative must be a string")
        rebuild = (l2_edited and _narrative_conflict(base_narrative, live.l2_archival.narrative, narrative)) or (
            edited_turns is not None and _turns_conflict(base_turns, edited_turns, buffer)
        )
        if rebuild:
            # the state the edit started from, with the edit: the live tiers
            if edited_turns is None:
                edited_turns = tiers_to_chatfold(live.l1_working, EntityLedger(), ArchivalMemory())["buffer"]
            buffer = _merge_turns(base_turns, edited_turns, buffer, refold=True)
            ledger = _checked_ledger(live.l1_5_entities.entities)
            narrative = live.l2_archival.narrative
        else:
            if edited_turns is not None:
                buffer = _merge_turns(base_turns, edited_turns, buffer)
            if sig.get("l1_5_entities") != old.get("l1_5_entities"):
                edited_ledger = _checked_ledger(live.l1_5_entities.entities).entities
                base = old.get("l1_5_entities")
                ledger = EntityLedger(entities=_merge_ledger(base if isinstance(base, dict) else {}, edited_ledger, current_ledger))
            else:
                ledger = EntityLedger(entities=current_ledger)
            if l2_edited:
                narrative = _merge_narrative(base_narrative, live.l2_archival.narrative, narrative)
        system = self.system_prompt
        if sig.get("l0_system") != old.get("l0_system"):
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
        self.generation += 1
        counters = dict(old_memory.stats())
        if rebuild and self.live_stats is not None:
            # the folds dropped with their turns are not counted: they are done again
            for key in ("folds_done", "messages_folded", "messages_dropped"):
                counters[key] = self.live_stats[key]
        self.carry(counters)  # type: ignore[attr-defined]
        self.dirty = True
        self._abandon_cycles()
        _hand_over(old_memory, memory)

    def _abandon_cycles(self) -> None:
        """The cycles of a replaced memory's fold in flight end: a
        ``CompressionCycleFailedEvent`` each (the new memory folds those turns again)."""
        cycles, self.cycles = list(self.cycles.values()), {}
        for cycle, _started, _before in cycles:
            self.emit(  # type: ignore[attr-defined]
                CompressionCycleFailedEvent(
                    cycle_id=cycle,
                    error_type="FoldAbandoned",
                    error_message="the memory was rebuilt from an edit of the state; its turns are folded again",
                    fallback_triggered=False,
                )
            )

    def truncate_oldest(self) -> int:
        """sawtooth's hard-limit fallback (``fallback_truncate`` in
        ``"always_llm"`` mode): the oldest ``chunk_size`` turns leave L1 at
        once (the latest turn always stays), and L2 notes how many (no
        event, as in sawtooth). Returns how many were dropped."""
        live = self.live_state()
        keep = max(len(live.l1_working.messages) - 1, 0)
        count = min(self.config.chunk_size, keep)  # type: ignore[attr-defined]
        if count == 0:
            return 0
        live.l1_working.slice_oldest(count)
        live.l2_archival.append_narrative(
            f"[HARD TRUNCATION: {count} messages dropped because the compression worker has not yet caught up.]"
        )
        self.sync()
        self.carried["messages_dropped"] += count  # type: ignore[attr-defined]
        s = self.memory.stats()
        self.hard = s["buffer_tokens"] >= self.config.hard_limit_tokens  # type: ignore[attr-defined]
        # as sawtooth's _force_truncate: a fallback, no event
        if self.fold_done is not None:  # as sawtooth's truncation, a fresh cycle may be queued
            self.fold_done()
        return count

    def _ledger_changed(self, key: str, value: str, operation: str) -> None:
        """The live ledger's callback: sawtooth's ``EntityAnchoredEvent``."""
        self.emit(EntityAnchoredEvent(entity_key=key, entity_value=value, operation=operation))  # type: ignore[attr-defined]


def _entry(message: Any) -> Tuple[Any, ...]:
    """A turn as the signature compares it."""
    if isinstance(message, Message):
        return (message.id, message.role, message.content)
    return ("not a Message", id(message))


def _signature(state: MemoryState) -> Dict[str, Any]:
    """What an edit of the tiers changes, cheap to compare: L0's text,
    L1's turns, L1.5's entries, L2's narrative (an object of the wrong
    type compares by identity, so replacing it is an edit too)."""
    messages = state.l1_working.messages
    entities = state.l1_5_entities.entities
    return {
        "l0_system": state.l0_system.content,
        "l1_working": [_entry(m) for m in messages] if isinstance(messages, list) else [("not a list", id(messages))],
        "l1_5_entities": (
            {k: list(v) if isinstance(v, list) else ("not a list", id(v)) for k, v in entities.items()}
            if isinstance(entities, dict)
            else ("not a dict", id(entities))
        ),
        "l2_archival": state.l2_archival.narrative,
    }


def _merge_turns(
    base: List[Any], edited: List[Dict[str, Any]], current: List[Dict[str, Any]], *, refold: bool = False
) -> List[Dict[str, Any]]:
    """L1 merged by message id: the edited turns (a text edit, a turn added
    or removed), less those the memory folded or dropped since ``base``
    (the turns the edit started from; ``refold``: kept, to be folded
    again), then any the memory gained since."""
    known = {entry[0] for entry in base if len(entry) == 3}
    now = {str(m.get("id") or "") for m in current}
    gone = set() if refold else known - now
    merged = [m for m in edited if m["id"] not in gone]
    kept = {m["id"] for m in merged}
    merged.extend(m for m in current if str(m.get("id") or "") not in known and str(m.get("id") or "") not in kept)
    return merged


def _turns_conflict(base: List[Any], edited: List[Dict[str, Any]], current: List[Dict[str, Any]]) -> bool:
    """Whether the edit changed or removed a turn the memory folded or
    dropped since ``base`` (a fold took the unedited text)."""
    now = {str(m.get("id") or "") for m in current}
    mine = {m["id"]: (m["id"], m["role"], m["content"]) for m in edited}
    for entry in base:
        if len(entry) == 3 and entry[0] not in now and mine.get(entry[0]) != tuple(entry):
            return True
    return False


def _merge_ledger(base: Mapping[str, Any], edited: Mapping[str, List[str]], current: Mapping[str, List[str]]) -> Dict[str, List[str]]:
    """L1.5 merged by key: the memory's current ledger, with each key the
    edit set, changed or removed (compared with ``base``) as the edit has it."""
    merged = {key: list(values) for key, values in current.items()}
    for key, values in edited.items():
        if base.get(key) != values:
            merged[key] = list(values)
    for key in base:
        if key not in edited:
            merged.pop(key, None)
    return merged


def _narrative_conflict(base: str, edited: str, current: str) -> bool:
    """Whether an edit of the narrative rewrote it (rather than appended
    to it) while a fold changed it."""
    return current != base and not edited.startswith(base)


def _merge_narrative(base: str, edited: str, current: str) -> str:
    """L2 merged: the edited narrative when the memory's has not changed;
    else what the edit appended, after the memory's current narrative
    (an edit that rewrote it meanwhile is :func:`_narrative_conflict`)."""
    if current == base:
        return edited
    added = edited[len(base):]
    if not added.strip():
        return current
    if not current:
        return added.lstrip("\n")
    if not base and not added.startswith("\n"):
        added = "\n" + added
    return current + added


def _checked_ledger(entities: Any) -> EntityLedger:
    if not isinstance(entities, Mapping):
        raise TypeError("l1_5_entities.entities must be a dict of key -> [values]")
    checked: Dict[str, List[str]] = {}
    for key, values in entities.items():
        if not isinstance(key, str) or not key.strip():
            raise TypeError(f"an entity key must be a non-empty string, got {key!r}")
        check_entity_key(key)
        if isinstance(values, str) or not isinstance(values, (list, tuple)):
            raise TypeError(f"entity {key!r} must map to a list of values, got {type(values).__name__}")
        clean = [str(v) for v in values if str(v).strip()]
        if any("\n" in v or "\r" in v for v in clean):
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
