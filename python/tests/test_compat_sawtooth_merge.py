"""chatfold.compat.sawtooth's live state when an edit meets a fold: the
ledger kept through a fold when L2 is empty, an edit rebuilt from the state
it started from when it cannot be merged with a fold that landed or took
its turns meanwhile, and the caller's turn kept whatever else fails."""

import asyncio

import pytest

import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth.state import Message

from sawtooth_helpers import TURN, compressor, sync_compressing
from sawtooth_helpers import config as _config


@pytest.mark.parametrize("mode", ["dte", "always_llm"])
def test_the_ledger_set_before_the_first_fold_survives_it_with_no_narrative(mode):
    options = {} if mode == "dte" else {"summarize": lambda request: "NARR"}
    config = compat.ContextManagerConfig.for_sync_script(
        soft_limit_tokens=60, hard_limit_tokens=5000, chunk_size=2, compression_mode=mode
    )
    with compat.SyncContextManager("Sys.", config, **options) as m:
        m.state.l1_5_entities.upsert({"ticket": "INC-1"})
        m.pin_entity("order", "ORD-9")
        for i in range(50):
            if m.get_stats()["chatfold"]["folds_done"]:
                break
            m.add_message("user", TURN.format(i))
        assert m.get_stats()["chatfold"]["folds_done"] >= 1
        assert m.state.l1_5_entities.entities == {"ticket": ["INC-1"], "order": ["ORD-9"]}
        assert m.state.l2_archival.narrative  # the fold's own text, the ledger apart
        assert "Exact identifiers" not in m.state.l2_archival.narrative


def test_a_saved_ledger_without_the_sections_blank_line_is_restored_with_it():
    from chatfold.compat.sawtooth.state import MemoryState, SystemPrompt

    saved = {"version": 2, "summary": "Exact identifiers (kept verbatim):\n- ticket: INC-1", "buffer": []}
    state = MemoryState(l0_system=SystemPrompt(content="Sys."), chatfold=saved)
    assert state._chatfold_state()["summary"] == "\n\nExact identifiers (kept verbatim):\n- ticket: INC-1"


async def _one_fold_then(edit, *, narrative=None, first_turn=None):
    """Six turns, one fold in flight, ``edit(state)``, the fold lands, the
    edit is applied (``get_stats``); then a turn is added and every later
    fold lands. Returns
    the summarizer's requests (previous summary, turns) before and after
    the edit was applied, the stats and the state right after it, and the
    memory's summary and state once the later folds landed."""
    requests = []
    first, later = asyncio.Event(), asyncio.Event()

    async def slow(request):
        requests.append((request.previous_summary, [m["content"] for m in request.messages]))
        await (first if len(requests) == 1 else later).wait()
        return f"S{len(requests)}"

    async with compat.ContextManager("Sys.", _config(), enable_events=False, summarize=slow) as cm:
        if narrative is not None:
            cm.state.l2_archival.narrative = narrative
        turns = [first_turn] if first_turn else []
        turns += [TURN.format(i) for i in range(6 - len(turns))]
        for turn in turns:
            await cm.add_message("user", turn)
        await asyncio.sleep(0.05)
        edit(cm.state)
        first.set()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if cm._tiers.memory.stats()["folds_done"]:
                break
        applied = len(requests)
        stats = cm.get_stats()["chatfold"]  # applies the edit
        right_after = cm.state.model_copy(deep=True)
        later.set()
        await cm.add_message("user", "NEXT")  # the core folds what is due when a turn comes
        for _ in range(300):
            await asyncio.sleep(0.01)
            if len(requests) > applied and not cm._tiers.memory.stats()["fold_in_flight"]:
                break
        return requests[:applied], requests[applied:], stats, right_after, cm._tiers.memory.summary, cm.state


def test_a_narrative_rewritten_while_a_fold_landed_keeps_the_callers_other_edits():
    def edit(state):
        state.l2_archival.narrative = "Earlier, corrected."
        state.l1_working.append(Message(role="user", content="IMPORTANT CALLER TURN"))
        state.l1_5_entities.upsert({"order": "ORD-77"})

    before, after, stats, right_after, summary, state = asyncio.run(_one_fold_then(edit, narrative="Earlier."))
    # no error; the landed fold is dropped and its turns are folded again
    assert right_after.l2_archival.narrative == "Earlier, corrected."
    assert [m.content for m in right_after.l1_working.messages] == [TURN.format(i) for i in range(6)] + ["IMPORTANT CALLER TURN"]
    assert right_after.l1_5_entities.get_latest("order") == "ORD-77"
    assert stats["folds_done"] == 0 and stats["messages_folded"] == 0
    assert after and after[0][0].startswith("Earlier, corrected.") and after[0][1][0] == TURN.format(0)
    assert "IMPORTANT CALLER TURN" in [m.content for m in state.l1_working.messages]
    assert state.l1_5_entities.get_latest("order") == "ORD-77"


def test_a_turn_redacted_while_a_fold_takes_it_is_folded_again_redacted():
    card = "4111-1111-1111-1111"

    def edit(state):
        state.l1_working.messages[0].content = "[REDACTED]"

    before, after, _, _, summary, state = asyncio.run(_one_fold_then(edit, first_turn=f"my card is {card} please remember"))
    assert card in before[0][1][0]  # the fold that took the unedited text is dropped
    assert after[0][1][0] == "[REDACTED]"
    assert card not in summary
    assert not any(card in v for values in state.l1_5_entities.entities.values() for v in values)


def test_a_turn_deleted_while_a_fold_takes_it_stays_deleted():
    def edit(state):
        del state.l1_working.messages[0]
        state.l1_working.messages[0].content = "EDITED-1"

    before, after, _, right_after, _, _ = asyncio.run(_one_fold_then(edit))
    assert before[0][1][0] == TURN.format(0)
    assert [m.content for m in right_after.l1_working.messages][:2] == ["EDITED-1", TURN.format(2)]
    assert after[0][1][0] == "EDITED-1"


def test_one_entity_the_ledger_cannot_hold_as_given_does_not_drop_the_folds_others():
    entities = {"ticket": "INC-7", "address": "1 Main St\nSpringfield", "status: open": "yes", "": "x"}
    with sync_compressing(compressor("Talked.", entities)) as config:
        with compat.SyncContextManager("Sys.", config) as m:
            for i in range(4):
                m.add_message("user", TURN.format(i))
            assert m.get_stats()["chatfold"]["folds_done"] >= 1
            assert m.state.l1_5_entities.entities == {
                "ticket": ["INC-7"],
                "address": ["1 Main St Springfield"],
                "status:open": ["yes"],
            }
            assert m.get_stats()["compression"]["failures"] == 0


def test_add_message_keeps_the_turn_when_a_pending_edit_is_refused():
    async def run():
        async with compat.ContextManager("Sys.", _config(soft_limit_tokens=1000), enable_events=False) as cm:
            await cm.add_message("user", "hello")
            cm.state.l1_5_entities.entities["bad\nkey"] = ["x"]
            with pytest.raises(ValueError, match="could not be applied"):
                await cm.add_message("user", "CALLER TURN")
            return [m.content for m in cm.state.l1_working.messages], cm.state.l1_5_entities.entities

    turns, ledger = asyncio.run(run())
    assert turns == ["hello", "CALLER TURN"] and ledger == {}

    config = compat.ContextManagerConfig.for_sync_script(soft_limit_tokens=1000)
    with compat.SyncContextManager("Sys.", config) as m:
        m.state.l2_archival.narrative = 7
        with pytest.raises(ValueError):
            m.add_message("user", "CALLER TURN")
        assert [x.content for x in m.state.l1_working.messages] == ["CALLER TURN"]
        assert m.state.l2_archival.narrative == ""
