"""chatfold.compat.sawtooth's live state, its hard-limit truncation and
latest-turn compression (sawtooth's way, and ``strict=True``), and the
parts a switched program's tests patch or watch (the worker's queue, the
compressor's ping)."""

import asyncio
from unittest.mock import patch

import pytest

import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth import middleware, sync_manager
from test_compat_sawtooth import DictStorage

from sawtooth_helpers import TURN, compressor, sync_compressing
from sawtooth_helpers import config as async_config


def _llm_config(**overrides):
    return async_config(**{"hard_limit_tokens": 60, **overrides})


def test_the_async_manager_truncates_at_the_hard_limit_as_sawtooth_unless_strict():
    async def never(request):
        await asyncio.Event().wait()  # the fold never lands

    async def session(strict):
        async with compat.ContextManager("Sys.", _llm_config(), enable_events=False, summarize=never, strict=strict) as cm:
            for i in range(12):
                await cm.add_message("user", TURN.format(i))
            state, stats = cm.state, cm.get_stats()
            return [m.content for m in state.l1_working.messages], state.l2_archival.narrative, stats

    kept, narrative, stats = asyncio.run(session(False))
    assert kept[-1] == TURN.format(11) and len(kept) < 12
    assert "[HARD TRUNCATION: 2 messages dropped" in narrative
    assert stats["chatfold"]["messages_dropped"] == 12 - len(kept)
    assert stats["l1_tokens"] < 60

    kept, narrative, stats = asyncio.run(session(True))
    assert kept == [TURN.format(i) for i in range(12)]
    assert narrative == "" and stats["chatfold"]["messages_dropped"] == 0


def test_the_sync_manager_compresses_the_latest_turn_as_sawtooth_unless_strict():
    stand_in = compressor("Asked about INC-7.", {"ticket": "INC-7"})
    with sync_compressing(stand_in, soft_limit_tokens=10, hard_limit_tokens=500, chunk_size=1) as sync_config:
        with compat.SyncContextManager("Sys.", sync_config) as m:
            m.add_message("user", "Please look at incident INC-7 for me today.")
            assert m.state.l1_working.messages == []
            assert m.state.l2_archival.narrative == "Asked about INC-7."
            assert m.state.l1_5_entities.get_latest("ticket") == "INC-7"
            assert m.get_stats()["compression"]["cycles"] == 1
            assert "- ticket: INC-7" in m.build_prompt()[0]["content"]
        stand_in.compress.assert_called_once_with("USER: Please look at incident INC-7 for me today.")
        stand_in.compress.reset_mock()
        with compat.SyncContextManager("Sys.", sync_config, strict=True) as m:
            m.add_message("user", "Please look at incident INC-7 for me today.")
            assert [x.content for x in m.state.l1_working.messages] == ["Please look at incident INC-7 for me today."]
            assert m.state.l2_archival.narrative == ""
        stand_in.compress.assert_not_called()


def test_a_failing_compressor_loses_no_turn():
    stand_in = compressor()
    stand_in.compress.side_effect = ConnectionError("down")
    with sync_compressing(stand_in, soft_limit_tokens=10, hard_limit_tokens=500, chunk_size=1) as sync_config:
        with compat.SyncContextManager("Sys.", sync_config) as m:
            m.add_message("user", "Please look at incident INC-7 for me today.")
            assert [x.content for x in m.state.l1_working.messages] == ["Please look at incident INC-7 for me today."]
            assert m.get_stats()["compression"]["failures"] == 1


def test_the_worker_queue_sees_each_cycle_sawtooth_would_queue():
    async def main():
        with patch.object(middleware.CompressionWorker, "enqueue") as enqueue:
            config = _llm_config(hard_limit_tokens=1000)
            async with compat.ContextManager("Sys.", config, enable_events=False, summarize=lambda r: "s") as cm:
                await cm.add_message("user", TURN.format(0))
                assert not enqueue.called  # under the soft limit
                for i in range(1, 4):
                    await cm.add_message("user", TURN.format(i))
                assert enqueue.call_count == 1  # debounced until the cycle ends
                task = enqueue.call_args[0][0]
                assert [m.content for m in task.messages] == [TURN.format(0), TURN.format(1)]
                for _ in range(50):  # the memory's worker folds (enqueue patched or not)
                    await asyncio.sleep(0.01)
                    if cm.get_stats()["worker"]["processed"]:
                        break
                assert cm.get_stats()["worker"]["processed"] >= 1
                await cm.add_message("user", TURN.format(4))
                await cm.add_message("user", TURN.format(5))
                assert enqueue.call_count == 2  # the lock was released when the fold landed

    asyncio.run(main())


def test_health_check_pings_the_backend():
    async def main():
        down = compat.ContextManagerConfig(ollama=compat.OllamaConfig(base_url="http://127.0.0.1:9"))
        report = await compat.ContextManager("Sys.", down, enable_events=False).health_check()
        assert report["status"] == "degraded"
        assert report["checks"]["backend"] == "ollama"
        assert report["checks"]["backend_reachable"].startswith("UNREACHABLE")
        keyless = compat.ContextManagerConfig(cloud={"provider": "openai", "model": "gpt-4o-mini", "api_key": " "})
        report = await compat.ContextManager("Sys.", keyless, enable_events=False).health_check()
        assert report["status"] == "unhealthy" and report["checks"]["provider"] == "openai"
        assert report["checks"]["backend_reachable"].startswith("MISSING")

    asyncio.run(main())
    with patch.object(sync_manager.SyncOllamaCompressor, "ping", return_value=None):
        with compat.SyncContextManager("Sys.") as m:
            report = m.health_check()
    assert report["status"] == "healthy" and report["checks"]["backend_reachable"] == "OK"


def test_an_upsert_on_the_live_ledger_is_an_event_and_reaches_the_prompt():
    async def main():
        seen = []

        async def capture(event):
            seen.append((event.entity_key, event.entity_value, event.operation))

        compat.get_event_bus().subscribe("l1_5.entity_anchored", capture)
        try:
            async with compat.ContextManager("Sys.", compat.ContextManagerConfig(journal_path="/dev/null")) as cm:
                cm.state.l1_5_entities.upsert({"conn_id": "abc-123"})
                cm.state.l1_5_entities.upsert({"conn_id": "abc-124"})
                prompt = await cm.build_prompt()
        finally:
            compat.get_event_bus().unsubscribe("l1_5.entity_anchored", capture)
        assert seen == [("conn_id", "abc-123", "insert"), ("conn_id", "abc-124", "update")]
        assert prompt[0]["content"].endswith("[ENTITY_LEDGER_L1_5]\n- conn_id: abc-123\n- conn_id: abc-124")

    asyncio.run(main())


def test_an_edit_and_a_fold_landing_meanwhile_are_both_kept():
    async def main():
        release = asyncio.Event()

        async def slow(request):
            await release.wait()
            return "earlier: the numbers"

        config = _llm_config(hard_limit_tokens=1000)
        async with compat.ContextManager("Sys.", config, enable_events=False, summarize=slow) as cm:
            for i in range(6):
                await cm.add_message("user", TURN.format(i))
            await asyncio.sleep(0.05)  # the fold is in flight
            cm.state.l1_5_entities.entities["owner"] = ["dana"]  # an edit not yet applied
            release.set()
            for _ in range(50):
                await asyncio.sleep(0.01)
                if cm._tiers.memory.stats()["folds_done"]:
                    break
            state = cm.state  # applies the edit over the landed fold
            stats = cm.get_stats()
        assert stats["chatfold"]["folds_done"] >= 1
        assert "earlier: the numbers" in state.l2_archival.narrative
        assert state.l1_5_entities.get_latest("owner") == "dana"
        assert len(state.l1_working.messages) < 6
        assert stats["chatfold"]["messages_folded"] + len(state.l1_working.messages) == 6

    asyncio.run(main())


def test_the_stats_counters_carry_over_an_applied_edit():
    config = compat.ContextManagerConfig.for_sync_script(soft_limit_tokens=30, hard_limit_tokens=400, chunk_size=2)
    with compat.SyncContextManager("Sys.", config) as m:
        for i in range(8):
            m.add_message("user", TURN.format(i))
        before = m.get_stats()["chatfold"]
        assert before["folds_done"] >= 1
        m.state.l2_archival.narrative = "rewritten"
        after = m.get_stats()["chatfold"]
        assert after["folds_done"] == before["folds_done"]
        assert after["messages_folded"] == before["messages_folded"]
        assert m.state.l2_archival.narrative == "rewritten"


def test_cloud_config_is_validated_as_pydantic_does():
    import pydantic

    with pytest.raises(pydantic.ValidationError):
        compat.CloudConfig(model="gpt-4o-mini", api_key="sk-x")
    cloud = compat.CloudConfig(provider="openai", model="gpt-4o-mini", api_key="sk-x")
    assert "sk-x" not in str(cloud.api_key) and cloud.api_key.get_secret_value() == "sk-x"


def test_the_async_manager_saves_a_session_whose_ledger_has_an_event_callback():
    async def main():
        storage = DictStorage()
        config = compat.ContextManagerConfig(storage_adapter=storage, session_id="s", journal_path="/dev/null")
        async with compat.ContextManager("Sys.", config) as cm:
            await cm.add_message("user", "hello")
            cm.state.l1_5_entities.upsert({"ticket": "INC-9"})
            await cm.build_prompt()
        async with compat.ContextManager("Sys.", config) as again:
            assert again.state.l1_5_entities.get_latest("ticket") == "INC-9"
            assert [m.content for m in again.state.l1_working.messages] == ["hello"]

    asyncio.run(main())


def test_no_turn_is_truncated_while_a_fold_is_under_way():
    async def main():
        release = asyncio.Event()

        async def slow(request):
            await release.wait()
            return "earlier turns"

        async with compat.ContextManager("Sys.", _llm_config(), enable_events=False, summarize=slow) as cm:
            for i in range(3):
                await cm.add_message("user", TURN.format(i))
            await asyncio.sleep(0.05)
            assert cm.get_stats()["chatfold"]["fold_in_flight"]
            for i in range(3, 12):
                await cm.add_message("user", TURN.format(i))
                prompt = await cm.build_prompt()
                assert compat_tokens(prompt) <= 60 and prompt[-1]["content"] == TURN.format(i)
            assert cm.get_stats()["chatfold"]["messages_dropped"] == 0
            assert len(cm.state.l1_working.messages) == 12
            release.set()
            for _ in range(50):
                await asyncio.sleep(0.01)
                if cm.get_stats()["worker"]["processed"]:
                    break
            assert "earlier turns" in cm.state.l2_archival.narrative

    asyncio.run(main())


def compat_tokens(prompt):
    import chatfold

    return chatfold.count_tokens(prompt, "cl100k_base")


def test_the_async_manager_folds_the_latest_turn_as_sawtooth_unless_strict():
    text = "This is a long message that definitely exceeds ten tokens by far."

    async def session(mode, summarize=None, strict=False):
        events = []
        bus = compat.get_event_bus()

        async def capture(event):
            events.append(event)

        channels = ("l1.eviction", "compression.cycle_started", "compression.cycle_failed", "dte.fold_created", "compression.cycle_complete")
        for channel in channels:
            bus.subscribe(channel, capture)
        config = compat.ContextManagerConfig(soft_limit_tokens=10, hard_limit_tokens=500, chunk_size=1, compression_mode=mode)
        try:
            async with compat.ContextManager("Agent", config, summarize=summarize, strict=strict, journal_path="/dev/null") as cm:
                await cm.add_message("user", text)
                for _ in range(100):
                    await asyncio.sleep(0.01)
                    if not cm.state.l1_working.messages or strict:
                        break
                state, stats = cm.state, cm.get_stats()["chatfold"]
                kept = [m.content for m in state.l1_working.messages]
        finally:
            for channel in channels:
                bus.unsubscribe(channel, capture)
        return kept, state.l2_archival.narrative, stats, {type(e).__name__: e for e in events}

    kept, narrative, stats, events = asyncio.run(session("dte"))
    assert kept == [] and "exceeds ten tokens" in narrative and stats["folds_done"] == 1
    eviction = events["L1EvictionEvent"]
    assert eviction.trigger == "soft_limit_exceeded" and eviction.messages_evicted == 1
    assert eviction.cycle_id == events["CompressionCycleStartEvent"].cycle_id == events["DTEFoldCreatedEvent"].cycle_id

    kept, narrative, stats, events = asyncio.run(session("always_llm", summarize=lambda request: "Asked for a long message."))
    assert kept == [] and narrative == "Asked for a long message."
    assert events["CompressionCycleCompleteEvent"].messages_compressed == 1

    def broken(request):
        raise RuntimeError("backend down")

    kept, narrative, _, events = asyncio.run(session("always_llm", summarize=broken))
    assert kept == [text] and narrative == ""  # nothing lost
    assert events["CompressionCycleFailedEvent"].error_type == "RuntimeError"

    kept, narrative, _, events = asyncio.run(session("dte", strict=True))
    assert kept == [text] and narrative == "" and "L1EvictionEvent" not in events
