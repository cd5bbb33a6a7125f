"""chatfold.compat.sawtooth's live state when an edit meets a fold: the
ledger kept through a fold when L2 is empty, an edit rebuilt from the state
it started from when it cannot be merged with a fold that landed or took
its turns meanwhile, and the caller's turn kept whatever else fails."""

import asyncio

import pytest

import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth.state import Message

TURN = "turn {} with enough words to count for something here"


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
