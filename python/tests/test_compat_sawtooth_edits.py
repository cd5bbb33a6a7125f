"""chatfold.compat.sawtooth's live state under edits: an edit merged with a
fold that landed meanwhile, the ledger's round trip through chatfold's
summary, a manager closed with an edit that cannot be applied, and the
live state's DTE counts."""

import asyncio

import pytest

import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth.events.types import CompressionCycleFailedEvent, CompressionCycleStartEvent
from chatfold.compat.sawtooth.state import Message

from sawtooth_helpers import TURN, compressor, sync_compressing
from sawtooth_helpers import config as _config


async def _fold_lands_after(edit):
    """Six turns, a fold in flight, ``edit(state)``, then the fold lands:
    the state, the stats and the memory's own turns."""
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return "SUMMARY-OF-FOLDED"

    async with compat.ContextManager("Sys.", _config(), enable_events=False, summarize=slow) as cm:
        for i in range(6):
            await cm.add_message("user", TURN.format(i))
        await asyncio.sleep(0.05)
        assert cm._tiers.memory.stats()["fold_in_flight"]
        edit(cm.state)
        release.set()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if cm._tiers.memory.stats()["folds_done"]:
                break
        state = cm.state
        return state, cm.get_stats()["chatfold"], [m["content"] for m in cm._tiers.memory.buffer]


def test_a_narrative_appended_while_a_fold_is_in_flight_keeps_the_fold():
    def edit(state):
        state.l2_archival.append_narrative("user note")

    state, stats, buffer = asyncio.run(_fold_lands_after(edit))
    assert state.l2_archival.narrative == "SUMMARY-OF-FOLDED\nuser note"
    assert stats["messages_folded"] == 5
    assert buffer == [TURN.format(5)] == [m.content for m in state.l1_working.messages]


def test_a_turn_edited_while_a_fold_is_in_flight_keeps_the_fold_without_duplicates():
    def edit(state):
        state.l1_working.messages[-1].content = "edited last turn"

    state, stats, buffer = asyncio.run(_fold_lands_after(edit))
    assert state.l2_archival.narrative == "SUMMARY-OF-FOLDED"
    assert stats["messages_folded"] == 5
    assert buffer == ["edited last turn"] == [m.content for m in state.l1_working.messages]


def test_a_turn_added_to_the_live_state_while_a_fold_is_in_flight_is_kept():
    def edit(state):
        state.l1_working.append(Message(role="assistant", content="added by hand"))

    state, stats, buffer = asyncio.run(_fold_lands_after(edit))
    assert stats["messages_folded"] == 5
    assert buffer == [TURN.format(5), "added by hand"]


def test_an_edit_that_abandons_a_fold_in_flight_ends_its_cycle():
    events = []

    async def run():
        bus = compat.get_event_bus()

        async def capture(event):
            events.append(event)

        bus.subscribe("compression.cycle_started", capture)
        bus.subscribe("compression.cycle_failed", capture)
        release = asyncio.Event()

        async def slow(request):
            await release.wait()
            return "SUMMARY"

        try:
            async with compat.ContextManager("Sys.", _config(), summarize=slow, journal_path="/dev/null") as cm:
                for i in range(6):
                    await cm.add_message("user", TURN.format(i))
                await asyncio.sleep(0.05)
                cm.state.l1_5_entities.upsert({"ticket": "INC-1"})
                cm.get_stats()  # applies the edit: the memory is rebuilt
                release.set()
                await asyncio.sleep(0.1)
        finally:
            bus.unsubscribe("compression.cycle_started", capture)
            bus.unsubscribe("compression.cycle_failed", capture)

    asyncio.run(run())
    started = [e.cycle_id for e in events if isinstance(e, CompressionCycleStartEvent)]
    failed = [e for e in events if isinstance(e, CompressionCycleFailedEvent)]
    assert started and started[0] in {e.cycle_id for e in failed}
    assert next(e for e in failed if e.cycle_id == started[0]).error_type == "FoldAbandoned"


def test_the_ledger_goes_back_to_an_earlier_value():
    with compat.SyncContextManager("Sys.", compat.ContextManagerConfig.for_sync_script()) as m:
        ledger = m.state.l1_5_entities
        for value in ("INC-1", "INC-2", "INC-1"):
            ledger.upsert({"ticket": value})
        assert m.state.l1_5_entities.get_latest("ticket") == "INC-1"
        assert "- ticket: INC-1" in m.build_prompt()[0]["content"].split("- ticket: INC-2")[1]


def test_a_key_with_a_space_reads_back_and_one_with_a_separator_is_refused():
    with compat.SyncContextManager("Sys.", compat.ContextManagerConfig.for_sync_script()) as m:
        m.pin_entity("customer name", "Dana Scully")
        assert m.state.l1_5_entities.get_latest("customer name") == "Dana Scully"
        assert m.state.l1_5_entities.entities == {"customer name": ["Dana Scully"]}
        with pytest.raises(ValueError, match="cannot contain ': '"):
            m.pin_entity("a: b", "c")
        m.state.l1_5_entities.upsert({"x: y": "z"})
        with pytest.raises(ValueError, match="cannot contain ': '"):
            m.get_stats()
        assert m.state.l1_5_entities.entities == {"customer name": ["Dana Scully"]}


class _Storage(compat.BaseStorageAdapter):
    def __init__(self):
        self.saved = {}

    async def load_state(self, session_id):
        return None

    async def save_state(self, session_id, state):
        self.saved[session_id] = state

    async def delete_state(self, session_id):
        pass

    async def load_pool_state(self, pool_id):
        return None

    async def save_pool_state(self, pool_id, entities, archive):
        pass


def test_stop_with_an_invalid_edit_still_stops_and_saves_the_memory():
    storage = _Storage()

    async def run():
        config = compat.ContextManagerConfig(storage_adapter=storage, session_id="s")
        cm = compat.ContextManager("Sys.", config, enable_events=False)
        await cm.start()
        await cm.add_message("user", "hello")
        cm.state.l1_5_entities.entities["two\nlines"] = ["x"]
        with pytest.raises(ValueError, match="could not be applied"):
            await cm.stop()
        return cm

    cm = asyncio.run(run())
    assert cm._running is False and cm._tiers.memory._task is None
    saved = storage.saved["s"]
    assert [m.content for m in saved.l1_working.messages] == ["hello"]
    assert saved.l1_5_entities.entities == {}


def test_the_sync_manager_closes_with_an_invalid_edit_and_saves_the_memory():
    storage = _Storage()
    config = compat.ContextManagerConfig.for_sync_script(storage_adapter=storage, session_id="s")
    m = compat.SyncContextManager("Sys.", config)
    with pytest.raises(ValueError, match="could not be applied"):
        with m:
            m.add_message("user", "hello")
            m.state.l1_5_entities.entities["two\nlines"] = ["x"]
    assert m._started is False
    assert [x.content for x in storage.saved["s"].l1_working.messages] == ["hello"]


def test_the_live_state_counts_the_prompt_tokens():
    async def run():
        config = compat.ContextManagerConfig(soft_limit_tokens=10000, hard_limit_tokens=20000, compression_mode="dte")
        async with compat.ContextManager("Sys.", config, enable_events=False) as m:
            await m.add_message("user", "hello there")
            state = m.state
            await m.build_prompt()
            return state.dte.main_prompt_tokens, m.get_stats()["dte"]["main_prompt_tokens"]

    live, stats = asyncio.run(run())
    assert live == stats > 0


def test_the_sync_wrappers_caller_edit_is_not_overwritten_by_a_landing_fold():
    # The caller's thread edits the live state while the wrapper's loop
    # lands a fold: the caller's last edit must survive.
    import threading
    import time

    release = threading.Event()

    async def slow(request):
        while not release.is_set():
            await asyncio.sleep(0.005)
        return "SUMMARY"

    with compat.SawtoothSyncWrapper("Sys.", _config(), enable_events=False, summarize=slow) as w:
        for i in range(6):
            w.add_message("user", TURN.format(i))
        for _ in range(200):
            if w.get_stats()["chatfold"]["fold_in_flight"]:
                break
            time.sleep(0.01)
        state = w.state
        release.set()  # the fold lands on the wrapper's loop while the caller edits
        deadline = time.monotonic() + 0.1
        n = 0
        while time.monotonic() < deadline:
            state.l1_5_entities.upsert({"ticket": f"INC-{n}"})
            n += 1
            time.sleep(0.001)
        state.l1_5_entities.upsert({"ticket": "INC-LAST"})
        for _ in range(200):
            if w.get_stats()["chatfold"]["folds_done"]:
                break
            time.sleep(0.01)
        assert w.state.l1_5_entities.get_latest("ticket") == "INC-LAST"
        assert w.state.l2_archival.narrative.startswith("SUMMARY")


def test_the_live_states_apply_and_refresh_wait_for_its_lock():
    # A second thread that holds the live state's lock (as one editing it
    # would) keeps the wrapper's calls from applying or refreshing it meanwhile.
    import threading

    with compat.SawtoothSyncWrapper("Sys.", _config(), enable_events=False, summarize=lambda r: "S") as w:
        w.add_message("user", "hello")
        tiers = w._cm._tiers
        state = w.state
        done = threading.Event()
        with tiers.lock:
            state.l1_5_entities.upsert({"ticket": "INC-1"})
            caller = threading.Thread(target=lambda: (w.get_stats(), done.set()), daemon=True)
            caller.start()
            assert not done.wait(0.2)  # waits for the lock
            state.l1_5_entities.upsert({"ticket": "INC-2"})
        assert done.wait(5)
        caller.join()
        assert w.state.l1_5_entities.get_history("ticket") == ["INC-1", "INC-2"]


def test_explain_prompt_gives_each_keys_values_and_its_journalled_lineage(tmp_path):
    from chatfold.compat.sawtooth.middleware import _extract_entity_event

    assert _extract_entity_event({"event_type": "entity_anchored", "payload": {"entity_key": "k", "operation": "update"}, "timestamp": "t"}) == ("k", "update", "t")
    assert _extract_entity_event({"other": 1}) == (None, "unknown", "unknown")

    async def run():
        config = compat.ContextManagerConfig(soft_limit_tokens=1000)
        async with compat.ContextManager("You are an AI.", config, journal_path=tmp_path / "audit.jsonl") as cm:
            cm.state.l2_archival.append_narrative("Old summary")
            cm.state.l1_5_entities.upsert({"user_id": "12345"})
            await cm.pin_entity("tracking code", "ALPHA-991")
            inside = cm.explain_prompt()
        return inside, cm.explain_prompt()

    inside, after = asyncio.run(run())
    assert inside["l2_archival"]["content"] == "Old summary"
    entries = {e["entity_key"]: e for e in after["l1_5_entities"]}
    assert entries["user_id"]["entity_value"] == ["12345"]
    assert "Operation: insert" in entries["user_id"]["origin"] and entries["user_id"]["timestamp"] != "unknown"
    assert entries["user_id"]["confidence"] == "100% (Deterministic)"
    assert entries["tracking code"]["confidence"] == "100% (Pinned)"


def test_the_sync_managers_folds_send_sawtooths_transcript_and_keep_the_entities():
    stand_in = compressor("Talked.", {"ticket": "INC-7"})
    with sync_compressing(stand_in) as config:
        with compat.SyncContextManager("Sys.", config) as m:
            for i in range(4):
                m.add_message("user", TURN.format(i))
            assert m.get_stats()["chatfold"]["folds_done"] >= 1
            assert m.state.l1_5_entities.get_latest("ticket") == "INC-7"
            first = stand_in.compress.call_args_list[0].args[0]
            assert first.startswith("USER: " + TURN.format(0) + "\n\nUSER: ")
            calls = stand_in.compress.call_count
            with pytest.raises(Exception):
                m.add_message("robot", "x")
            assert stand_in.compress.call_count == calls


def test_a_hard_truncation_emits_no_eviction_event_as_sawtooth():
    events = []

    async def never(request):
        await asyncio.Event().wait()

    async def run():
        bus = compat.get_event_bus()

        async def capture(event):
            events.append(event)

        bus.subscribe("l1.eviction", capture)
        bus.subscribe("monitor.hard_limit_reached", capture)
        try:
            config = _config(hard_limit_tokens=60)
            async with compat.ContextManager("Sys.", config, summarize=never, journal_path="/dev/null") as cm:
                for i in range(12):
                    await cm.add_message("user", TURN.format(i))
                return cm.get_stats()["chatfold"]["messages_dropped"]
        finally:
            bus.unsubscribe("l1.eviction", capture)
            bus.unsubscribe("monitor.hard_limit_reached", capture)

    dropped = asyncio.run(run())
    assert dropped > 0
    assert [e for e in events if isinstance(e, compat.HardLimitReachedEvent)]  # the events do arrive
    assert not [e for e in events if isinstance(e, compat.L1EvictionEvent) and e.trigger == "hard_limit_forced"]
