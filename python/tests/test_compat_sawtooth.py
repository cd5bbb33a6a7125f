"""chatfold.compat.sawtooth against sawtooth-memory 0.3.0 itself: every
exported name and public submodule imports; the configuration, signatures
and event types are the same; the managers give the same prompt and stats
on the same turns where sawtooth is right, and keep the hard limit where
sawtooth passes it; events fire; unsupported features raise."""

import asyncio
import dataclasses
import importlib
import importlib.util
import inspect
import logging
import os
import pathlib
import time

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sawtooth_memory

import chatfold
import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth import NotSupportedError


@pytest.fixture(autouse=True)
def _quiet_and_isolated(tmp_path, monkeypatch):
    """sawtooth logs warnings on every hard-limit hit and writes its journal
    into the working directory: both kept out of the test run."""
    monkeypatch.chdir(tmp_path)
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)
    sawtooth_memory.reset_event_bus()
    compat.reset_event_bus()


# Every public submodule of sawtooth-memory 0.3.0 (its wheel's files).
SUBMODULES = """async_bridge compression_core compression_utils compressor config dte_runtime embeddings
embeddings.base embeddings.factory embeddings.hash embeddings.openai entity_guard events events.bus
events.handlers events.types exceptions fold_unit integrations integrations.langchain_adapter
integrations.langgraph integrations.langgraph.adapter integrations.langgraph.graph intent_planner journal
l3_indexer middleware monitor ner novelty observation_crush prompt_compiler providers providers.adapters
providers.factory salience state storage storage.base storage.postgres_adapter storage.redis_adapter
storage.semantic sync_compressor sync_manager sync_wrapper worker""".split()

# The integrations need langchain (and langgraph) to import, in sawtooth and here.
INTEGRATIONS = {
    "integrations.langchain_adapter",
    "integrations.langgraph",
    "integrations.langgraph.adapter",
    "integrations.langgraph.graph",
}


def public_names(module):
    """The classes and functions a sawtooth module defines or exports."""
    names = set(getattr(module, "__all__", []))
    for name, value in vars(module).items():
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value)):
            if getattr(value, "__module__", None) == module.__name__:
                names.add(name)
    return names


def test_every_exported_name_and_submodule_imports():
    assert compat.__all__ == sawtooth_memory.__all__
    assert compat.__version__ == sawtooth_memory.__version__
    for name in sawtooth_memory.__all__:
        assert getattr(compat, name) is not None, name
    for sub in SUBMODULES:
        if sub in INTEGRATIONS and importlib.util.find_spec("langgraph") is None:
            continue  # .ci/run installs it
        ours = importlib.import_module(f"chatfold.compat.sawtooth.{sub}")
        names = public_names(importlib.import_module(f"sawtooth_memory.{sub}"))
        missing = sorted(n for n in names if not hasattr(ours, n))
        assert not missing, f"{sub}: {missing}"
    # `from sawtooth_memory.x import Y`, as a switched program writes it
    from chatfold.compat.sawtooth.config import CloudConfig, Provider  # noqa: F401
    from chatfold.compat.sawtooth.events.types import L1EvictionEvent  # noqa: F401
    from chatfold.compat.sawtooth.storage.redis_adapter import RedisStorageAdapter  # noqa: F401


def test_the_same_configuration_fields_defaults_and_checks():
    theirs = {
        k: (f.default_factory() if f.default_factory else f.default)
        for k, f in sawtooth_memory.ContextManagerConfig.model_fields.items()
    }
    ours = {
        f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
        for f in dataclasses.fields(compat.ContextManagerConfig)
    }
    assert ours == theirs
    assert [p.value for p in compat.Provider] == [p.value for p in sawtooth_memory.Provider]
    assert dataclasses.asdict(compat.OllamaConfig()) == sawtooth_memory.OllamaConfig().model_dump()
    for preset in [{}, {"hard_limit_tokens": 9000}]:
        a = compat.ContextManagerConfig.for_sync_script(**preset)
        b = sawtooth_memory.ContextManagerConfig.for_sync_script(**preset)
        assert dataclasses.asdict(a) == b.model_dump()
    for bad in [
        {"background_spend_ratio": 2.0},
        {"salience_threshold": -0.1},
        {"obs_crush_min_tokens": 0},
        {"novelty_min_residual": 1.5},
        {"salience_max_entities": 0},
        {"enable_l3_semantic_storage": True},
    ]:
        with pytest.raises(ValueError):
            sawtooth_memory.ContextManagerConfig(**bad)
        with pytest.raises(ValueError):
            compat.ContextManagerConfig(**bad)
    # background_model routes to Ollama for a local model name
    assert compat.ContextManagerConfig(background_model="phi4").ollama.model == "phi4"
    assert sawtooth_memory.ContextManagerConfig(background_model="phi4").ollama.model == "phi4"
    cloud = compat.CloudConfig(provider="anthropic", model="claude-3-5-haiku-latest", api_key="sk-secret")
    assert cloud.provider is compat.Provider.ANTHROPIC
    assert "sk-secret" not in repr(cloud) and cloud.api_key.get_secret_value() == "sk-secret"


@pytest.mark.parametrize("name", ["ContextManager", "SyncContextManager", "SawtoothSyncWrapper"])
def test_the_managers_have_sawtooths_methods_and_signatures(name):
    ours, theirs = getattr(compat, name), getattr(sawtooth_memory, name)
    for attr, value in vars(theirs).items():
        if attr.startswith("_") and attr not in ("__init__", "__enter__", "__aenter__"):
            continue
        if isinstance(value, property):
            assert isinstance(inspect.getattr_static(ours, attr), property), attr
            continue
        if not callable(value):
            continue
        mine = inspect.getattr_static(ours, attr)
        theirs_params = list(inspect.signature(value).parameters.values())
        our_params = list(inspect.signature(mine).parameters.values())
        # the same parameters, in order, with the same defaults; chatfold may add keyword-only ones
        assert [(p.name, p.kind, p.default) for p in our_params[: len(theirs_params)]] == [
            (p.name, p.kind, p.default) for p in theirs_params
        ], f"{name}.{attr}"
        assert all(p.kind is p.KEYWORD_ONLY for p in our_params[len(theirs_params):]), f"{name}.{attr}"
        assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(value), f"{name}.{attr}"


def test_the_event_types_have_sawtooths_fields_and_defaults():
    for name in sawtooth_memory.events.__all__:
        theirs = getattr(sawtooth_memory.events, name)
        ours = getattr(compat.events, name)
        if not dataclasses.is_dataclass(theirs):
            continue
        fields = lambda cls: [(f.name, f.default) for f in dataclasses.fields(cls)]  # noqa: E731
        assert fields(ours) == fields(theirs), name
        assert issubclass(ours, compat.SawtoothEvent)


words = st.lists(st.sampled_from("alpha beta gamma delta echo kilo lima tango some more text".split()), min_size=1, max_size=12)
turns = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), words.map(" ".join)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=turns, system=words.map(" ".join))
def test_under_the_soft_limit_the_same_prompt_and_stats_as_sawtooth(turns, system):
    """Plain turns well under the soft limit: sawtooth is right, and both
    give the same prompt (its layout) and the same token counts."""
    config = dict(soft_limit_tokens=5000, hard_limit_tokens=8000)
    results = []
    for module in (sawtooth_memory, compat):
        with module.SyncContextManager(system, module.ContextManagerConfig.for_sync_script(**config)) as m:
            for role, content in turns:
                m.add_message(role, content)
            stats = m.get_stats()
            keys = ["l0_tokens", "l1_tokens", "l1_message_count", "l1_5_entity_count", "l2_tokens", "l3_chunk_count"]
            results.append((m.build_prompt(), {k: stats[k] for k in keys}, sorted(stats)))
    (their_prompt, their_stats, their_keys), (our_prompt, our_stats, our_keys) = results
    assert our_prompt == their_prompt
    assert our_stats == their_stats
    assert set(their_keys) <= set(our_keys)


def test_bad_input_raises_value_errors_in_both():
    for module in (sawtooth_memory, compat):
        with module.SyncContextManager("be brief") as m:
            with pytest.raises(ValueError):
                m.add_message("bogus", "x")
            with pytest.raises(ValueError):
                m.add_message("user", None)
            assert m.get_stats()["l1_message_count"] == 0  # nothing half-added
        with pytest.raises(RuntimeError):
            module.SyncContextManager("outside a with block").add_message("user", "hi")
    with pytest.raises(ValueError):
        compat.SyncContextManager(None)
    with pytest.raises(ValueError):
        compat.ContextManagerConfig(soft_limit_tokens="many")


def test_fallback_truncate_off_raises_at_the_hard_limit_in_both_and_keeps_the_turn():
    big = "word " * 400
    for module in (sawtooth_memory, compat):
        config = module.ContextManagerConfig.for_sync_script(soft_limit_tokens=100, hard_limit_tokens=200, fallback_truncate=False)
        with module.SyncContextManager("be brief", config) as m:
            with pytest.raises(module.TokenLimitExceededError):
                m.add_message("user", big)
            assert m.get_stats()["l1_message_count"] >= 1


def test_sawtooth_passes_its_hard_limit_and_chatfold_does_not():
    """The defect chatfold fixes: sawtooth's hard limit watches L1 only,
    so a long system prompt (or ledger, or archive) puts the prompt over it."""
    system = "Follow the house rules carefully. " * 60
    config = dict(soft_limit_tokens=300, hard_limit_tokens=400)
    tokens = {}
    for module in (sawtooth_memory, compat):
        with module.SyncContextManager(system, module.ContextManagerConfig.for_sync_script(**config)) as m:
            for i in range(30):
                m.add_message("user" if i % 2 == 0 else "assistant", f"turn {i} about the weekly numbers")
                prompt = m.build_prompt()
                assert prompt[-1]["content"] == f"turn {i} about the weekly numbers"
                assert prompt[0]["content"].startswith("[SYSTEM_L0]\n" + system)
            tokens[module] = chatfold.count_tokens(prompt, "gpt-4o")
    assert tokens[sawtooth_memory] > 400
    assert tokens[compat] <= 400


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 120), min_size=1, max_size=40),
    fails=st.booleans(),
    fallback=st.booleans(),
)
def test_the_sync_prompt_never_passes_the_hard_limit(sizes, fails, fallback):
    def summarize(request):
        if fails:
            raise ConnectionError("the model is down")
        return "earlier: numbers were discussed"

    config = compat.ContextManagerConfig.for_sync_script(soft_limit_tokens=150, hard_limit_tokens=400, fallback_truncate=fallback)
    with compat.SyncContextManager("You are terse.", config, summarize=summarize) as m:
        for i, size in enumerate(sizes):
            try:
                m.add_message("user" if i % 2 == 0 else "assistant", f"m{i} " + "x " * size)
            except compat.TokenLimitExceededError:
                assert not fallback
            prompt = m.build_prompt()
            assert chatfold.count_tokens(prompt, "gpt-4o") <= 400
            assert prompt[-1]["content"].startswith(f"m{i} ")
        stats = m.get_stats()
        if fails:
            assert stats["compression"]["failures"] >= (1 if stats["compression"]["cycles"] else 0)
            assert stats["l2_tokens"] == 0
        core = stats["chatfold"]
        assert core["messages_folded"] + core["messages_dropped"] + stats["l1_message_count"] == len(sizes)
        if not fallback:  # nothing dropped from the state
            assert core["messages_dropped"] == 0


def test_the_async_prompt_never_passes_the_hard_limit_while_compression_is_slow():
    async def main():
        release = asyncio.Event()

        async def slow(request):
            await release.wait()
            return "earlier turns: files were read"

        config = compat.ContextManagerConfig(soft_limit_tokens=300, hard_limit_tokens=600)
        async with compat.ContextManager("You are a careful agent.", config, summarize=slow) as cm:
            for i in range(200):
                await cm.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: read /srv/data/file-{i}.csv and summarize it")
                prompt = await cm.build_prompt()
                assert chatfold.count_tokens(prompt, "gpt-4o") <= 600
                assert prompt[0]["content"] == "[SYSTEM_L0]\nYou are a careful agent."
                assert prompt[-1]["content"].startswith(f"turn {i}:")
            stats = cm.get_stats()
            assert stats["l1_message_count"] == 200  # hidden from the prompt, not lost
            assert stats["worker"]["processed"] == 0 and stats["worker"]["running"]
            release.set()
            for _ in range(200):
                await asyncio.sleep(0.005)
                if cm.get_stats()["worker"]["processed"] >= 1:
                    break
            stats = cm.get_stats()
            assert stats["worker"]["processed"] >= 1
            assert "[ARCHIVE_L2]\nearlier turns: files were read" in (await cm.build_prompt())[0]["content"]
        assert not cm.get_stats()["worker"]["running"]

    asyncio.run(main())


def test_the_default_dte_mode_folds_without_a_model_like_sawtooth():
    """sawtooth's default mode folds with no model call (nothing listens on
    Ollama's port here); so does chatfold's: same turns, both fold, both
    keep the identifiers and the latest turns."""

    async def run(module):
        config = module.ContextManagerConfig(soft_limit_tokens=120, hard_limit_tokens=300, chunk_size=4)
        async with module.ContextManager("You are a careful agent.", config) as cm:
            for i in range(14):
                await cm.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: read /srv/data/file-{i}.csv")
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            return await cm.build_prompt(), cm.get_stats()

    for module in (sawtooth_memory, compat):
        prompt, stats = asyncio.run(run(module))
        assert prompt[0]["content"].startswith("[SYSTEM_L0]\nYou are a careful agent.")
        assert prompt[-1] == {"role": "assistant", "content": "turn 13: read /srv/data/file-13.csv"}
        assert stats["worker"]["processed"] >= 1 and stats["worker"]["failed"] == 0
        assert stats["dte"]["fold_cycles"] >= 1 and stats["dte"]["mode"] == "dte"
        assert stats["l1_message_count"] < 14
        assert "/srv/data/file-" in prompt[0]["content"]  # the ledger holds folded paths
        if module is compat:  # sawtooth's ledger JSON grows past the hard limit here
            assert chatfold.count_tokens(prompt, "gpt-4o") <= 300


def test_in_dte_mode_the_same_kinds_of_events_as_sawtooth():
    async def run(module):
        seen = []

        async def handler(event):
            seen.append(event)

        module.get_event_bus().subscribe_all(handler)
        config = module.ContextManagerConfig(soft_limit_tokens=120, hard_limit_tokens=600, chunk_size=4)
        journal = pathlib.Path(f"{module.__name__}.jsonl")
        async with module.ContextManager("You are a careful agent.", config, journal_path=journal) as cm:
            for i in range(14):
                await cm.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: read /srv/data/file-{i}.csv")
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
        return seen

    theirs, ours = asyncio.run(run(sawtooth_memory)), asyncio.run(run(compat))
    folds = {"monitor.soft_limit_reached", "compression.cycle_started", "l1.eviction", "dte.fold_created"}
    # entity events only when chatfold's ledger gains an entry (an identifier
    # the summary's text already holds verbatim is not repeated in it)
    assert folds <= {e.event_type for e in ours} <= {e.event_type for e in theirs} == folds | {"l1_5.entity_anchored"}
    for kind in ["compression.cycle_started", "l1.eviction", "dte.fold_created"]:
        ours_one = next(e for e in ours if e.event_type == kind)
        theirs_one = next(e for e in theirs if e.event_type == kind)
        assert type(ours_one).__name__ == type(theirs_one).__name__
        assert sorted(vars(ours_one)) == sorted(k for k in vars(theirs_one) if k != "strategy")
    fold = next(e for e in ours if isinstance(e, compat.DTEFoldCreatedEvent))
    assert fold.messages_folded >= 1 and fold.tokens_evicted > 0 and fold.recoverable is False
    # no cycle is journalled for a DTE fold, in either (sawtooth journals its ledger events)
    assert "cycle_id" not in pathlib.Path("sawtooth_memory.jsonl").read_text()
    assert not pathlib.Path("chatfold.compat.sawtooth.jsonl").exists()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=turns, system=words.map(" ".join))
def test_the_async_managers_agree_with_sawtooth_under_the_soft_limit(turns, system):
    async def run(module):
        config = module.ContextManagerConfig(soft_limit_tokens=5000, hard_limit_tokens=8000)
        async with module.ContextManager(system, config, enable_events=False) as cm:
            for role, content in turns:
                await cm.add_message(role, content)
            stats = cm.get_stats()
            return await cm.build_prompt(), [stats[k] for k in ["l0_tokens", "l1_tokens", "l1_message_count", "l2_tokens"]]

    assert asyncio.run(run(compat)) == asyncio.run(run(sawtooth_memory))


def test_events_fire_with_sawtooths_names_and_payloads():
    seen = []

    async def handler(event):
        seen.append(event)

    async def main(summarize):
        bus = compat.get_event_bus()
        bus.subscribe_all(handler)
        config = compat.ContextManagerConfig(soft_limit_tokens=100, hard_limit_tokens=400, compression_mode="always_llm")
        async with compat.ContextManager("You are brief.", config, summarize=summarize) as cm:
            for i in range(12):
                await cm.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: order ord_{i:04d} shipped to /srv/out/{i}.json")
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            return cm.get_stats()

    async def good(request):
        return "orders shipped"

    stats = asyncio.run(main(good))
    kinds = [e.event_type for e in seen]
    assert "monitor.soft_limit_reached" in kinds
    for kind in ["compression.cycle_started", "l1.eviction", "l2.summary_generated", "compression.cycle_complete"]:
        assert kinds.count(kind) == stats["worker"]["processed"] >= 1, kind
    assert "dte.fold_created" not in kinds  # always_llm mode
    start = next(e for e in seen if isinstance(e, compat.CompressionCycleStartEvent))
    evict = next(e for e in seen if isinstance(e, compat.L1EvictionEvent))
    summary = next(e for e in seen if isinstance(e, compat.L2SummaryGeneratedEvent))
    done = next(e for e in seen if isinstance(e, compat.CompressionCycleCompleteEvent))
    assert start.cycle_id == evict.cycle_id == summary.cycle_id == done.cycle_id
    assert start.chunk_size == 4 and evict.trigger == "soft_limit_exceeded"
    assert evict.messages_evicted == len(evict.evicted_message_ids) == done.messages_compressed >= 1
    assert evict.tokens_evicted == done.l1_tokens_evicted > 0
    assert summary.summary_text == done.l2_summary_generated == "orders shipped"
    assert summary.provider == "custom" and summary.model == "good"
    anchored = [e for e in seen if isinstance(e, compat.EntityAnchoredEvent)]
    assert anchored and all(e.operation in ("insert", "update", "delete") for e in anchored)
    assert set(done.l1_5_entities_retained) <= {e.entity_key for e in anchored}
    # the journal: one line per completed cycle, in sawtooth's record format,
    # and one per ledger change (sawtooth's entity records, for explain_prompt)
    records = pathlib.Path(".sawtooth_journal.jsonl").read_text().splitlines()
    lines = [line for line in records if '"entity_anchored"' not in line]
    assert len(lines) == stats["worker"]["processed"]
    assert len(records) - len(lines) == len(anchored)
    assert '"l2_summary_generated":"orders shipped"' in lines[0]

    seen.clear()
    compat.reset_event_bus()

    async def bad(request):
        raise ConnectionError("the model is down")

    stats = asyncio.run(main(bad))
    failed = [e for e in seen if isinstance(e, compat.CompressionCycleFailedEvent)]
    assert failed and failed[0].error_type == "ConnectionError" and failed[0].error_message == "the model is down"
    assert stats["worker"]["failed"] == len(failed) and stats["worker"]["processed"] == 0
    assert not [e for e in seen if isinstance(e, compat.CompressionCycleCompleteEvent)]


def test_the_sync_wrapper_folds_in_the_background():
    config = compat.ContextManagerConfig(soft_limit_tokens=80, hard_limit_tokens=300)
    wrapper = compat.SawtoothSyncWrapper("You are brief.", config, enable_events=False)
    with pytest.raises(RuntimeError):
        wrapper.add_message("user", "too early")
    with wrapper as w:
        for i in range(12):
            w.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: see /tmp/report-{i}.txt")
            assert chatfold.count_tokens(w.build_prompt(), "gpt-4o") <= 300
        for _ in range(200):
            if w.get_stats()["worker"]["processed"]:
                break
            time.sleep(0.005)
        stats = w.get_stats()
        assert stats["worker"]["processed"] >= 1 and stats["worker"]["running"]
        assert w.state.l1_working.token_count == stats["l1_tokens"]
        assert w.health_check()["checks"]["worker_status"] == "RUNNING"
    with pytest.raises(RuntimeError):
        w.get_stats()


class DictStorage(compat.BaseStorageAdapter):
    """An in-memory storage adapter: what a user's own adapter looks like."""

    def __init__(self):
        self.saved = {}

    async def load_state(self, session_id):
        raw = self.saved.get(session_id)
        return compat.MemoryState.model_validate_json(raw) if raw else None

    async def save_state(self, session_id, state):
        self.saved[session_id] = state.model_dump_json()

    async def delete_state(self, session_id):
        self.saved.pop(session_id, None)

    async def load_pool_state(self, pool_id):
        return None

    async def save_pool_state(self, pool_id, entities, archive):
        pass


class VectorStorage(DictStorage, compat.storage.semantic.SemanticStorageAdapter):
    """A storage adapter that claims L3 (sawtooth's config accepts it; chatfold's managers refuse L3)."""

    embedding_dimension = 1536

    async def upsert_vector_chunks_batch(self, session_id, chunks):
        return 0

    async def search_similar(self, session_id, query_embedding, top_k=5):
        return []

    async def count_vector_chunks(self, session_id):
        return 0


def _session_round_trip(adapter):
    config = compat.ContextManagerConfig.for_sync_script(
        soft_limit_tokens=80, hard_limit_tokens=300, storage_adapter=adapter, session_id="s1"
    )
    with compat.SyncContextManager("You are brief.", config) as m:
        for i in range(10):
            m.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: see /tmp/report-{i}.txt")
        before, stats = m.build_prompt(), m.get_stats()
    assert stats["compression"]["cycles"] >= 1
    with compat.SyncContextManager("ignored: the saved L0 wins, as in sawtooth", config) as m:
        assert m.build_prompt() == before
        assert m.get_stats()["l1_message_count"] == stats["l1_message_count"]


def test_a_session_saved_in_a_storage_adapter_comes_back_whole():
    adapter = DictStorage()
    _session_round_trip(adapter)
    # a state sawtooth-memory saved loads too: its L0 and L1
    with sawtooth_memory.SyncContextManager("Their system prompt.") as theirs:
        theirs.add_message("user", "hello from sawtooth")
        dumped = theirs.state.model_dump_json()
    adapter.saved["s2"] = dumped
    config = compat.ContextManagerConfig.for_sync_script(storage_adapter=adapter, session_id="s2")
    with compat.SyncContextManager("", config) as m:
        assert m.build_prompt() == [
            {"role": "system", "content": "[SYSTEM_L0]\nTheir system prompt."},
            {"role": "user", "content": "hello from sawtooth"},
        ]
    with pytest.raises(ValueError):
        compat.MemoryState.model_validate_json("{not json")
    with pytest.raises(ValueError):
        compat.MemoryState.model_validate({"l1_working": {}})


def test_the_state_is_live_and_its_edits_reach_the_prompt():
    with compat.SyncContextManager("You are brief.") as m:
        m.add_message("user", "hello")
        state = m.state
        assert state is m.state  # one live object, as sawtooth's
        assert [x.content for x in state.l1_working.messages] == ["hello"]
        state.l2_archival.narrative = "The user greeted us."
        state.l1_5_entities.upsert({"ticket": "INC-4471"})
        state.l1_working.append(compat.state.Message(role="assistant", content="hi there"))
        prompt = m.build_prompt()
        assert prompt[0]["content"] == (
            "[SYSTEM_L0]\nYou are brief.\n\n[ARCHIVE_L2]\nThe user greeted us."
            "\n\n[ENTITY_LEDGER_L1_5]\n- ticket: INC-4471"
        )
        assert [p["content"] for p in prompt[1:]] == ["hello", "hi there"]
        # the memory follows: a new turn shows in the same object, the edits kept
        m.add_message("user", "again")
        assert [x.content for x in state.l1_working.messages] == ["hello", "hi there", "again"]
        assert state.l1_5_entities.get_latest("ticket") == "INC-4471"
        assert m.get_stats()["l1_5_entity_count"] == 1
        # pin_entity is an upsert into the ledger
        m.pin_entity("ticket", "INC-4472")
        assert "- ticket: INC-4472" in m.build_prompt()[0]["content"]


def test_an_edit_that_cannot_be_applied_is_refused_and_loses_nothing():
    with compat.SyncContextManager("You are brief.") as m:
        m.add_message("user", "hello")
        m.state.l2_archival.narrative = "kept"
        before = m.build_prompt()
        m.state.l1_5_entities.entities["ticket"] = "INC-1"  # a string, not a list of values
        with pytest.raises(ValueError, match="could not be applied"):
            m.build_prompt()
        assert m.build_prompt() == before
        assert m.state.l1_5_entities.entities == {}
        m.state.l1_working.messages.append({"role": "bot", "content": "x"})
        with pytest.raises(ValueError, match="could not be applied"):
            m.add_message("user", "next")  # the edit is discarded, the turn stored
        assert [x.content for x in m.state.l1_working.messages] == ["hello", "next"]
        with pytest.raises(pydantic.ValidationError):
            compat.state.Message(role="bot", content="x")


def test_the_redis_storage_keeps_the_whole_session(redis_url):
    adapter = compat.RedisStorageAdapter(redis_url, ttl_seconds=60)
    _session_round_trip(adapter)

    async def check():
        import redis.asyncio

        client = redis.asyncio.from_url(redis_url, decode_responses=True)
        assert await client.ttl("sawtooth:session:s1:l1") > 0
        await adapter.delete_state("s1")
        assert await adapter.load_state("s1") is None
        await client.aclose()

    asyncio.run(check())


def test_unsupported_features_raise_a_clear_error():
    from chatfold.compat.sawtooth.ner import NERPipeline

    for use in [
        lambda: compat.HashEmbeddingProvider(dimension=8),
        lambda: compat.create_embedding_provider("hash"),
        lambda: NERPipeline(),
        lambda: compat.ContextManager("x", compat.ContextManagerConfig(pool_id="team")),
        lambda: compat.ContextManager(
            "x", compat.ContextManagerConfig(enable_l3_semantic_storage=True, storage_adapter=VectorStorage())
        ),
    ]:
        with pytest.raises(NotSupportedError) as caught:
            use()
        assert isinstance(caught.value, NotImplementedError)
        assert isinstance(caught.value, chatfold.ChatfoldError)
        assert isinstance(caught.value, compat.SawtoothError)
        assert "not supported by chatfold" in str(caught.value) and caught.value.feature


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 150), min_size=1, max_size=30),
    mode=st.sampled_from(["ok", "slow", "fails"]),
    tasks=st.integers(1, 3),
)
def test_the_async_prompt_never_passes_the_hard_limit_with_concurrent_adds(sizes, mode, tasks):
    async def summarize(request):
        await asyncio.sleep(0.002 if mode == "slow" else 0)
        if mode == "fails":
            raise TimeoutError("slow model")
        return "earlier: things were said"

    async def main():
        config = compat.ContextManagerConfig(soft_limit_tokens=150, hard_limit_tokens=450, fallback_truncate=False)
        async with compat.ContextManager("You are terse.", config, enable_events=False, summarize=summarize) as cm:

            async def add(k):
                for i, size in enumerate(sizes):
                    try:
                        await cm.add_message("user", f"t{k}-{i} " + "y " * size)
                    except compat.TokenLimitExceededError:
                        pass  # stored; the prompt still fits
                    prompt = await cm.build_prompt()
                    assert chatfold.count_tokens(prompt, "gpt-4o") <= 450
                    await asyncio.sleep(0)

            await asyncio.gather(*(add(k) for k in range(tasks)))
            core = cm.get_stats()["chatfold"]
            # fallback_truncate off: every turn is in the buffer or folded, none lost
            assert core["messages_dropped"] == 0
            assert core["messages_folded"] + core["buffer_messages"] == len(sizes) * tasks

    asyncio.run(main())


def test_an_async_session_comes_back_from_storage_and_an_unknown_tokenizer_falls_back():
    adapter = DictStorage()

    async def session(system):
        config = compat.ContextManagerConfig(
            soft_limit_tokens=80, hard_limit_tokens=300, storage_adapter=adapter, tokenizer_model="my-local-model"
        )
        async with compat.ContextManager(system, config, enable_events=False) as cm:
            if system:
                for i in range(10):
                    await cm.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: see /tmp/report-{i}.txt")
                await asyncio.sleep(0.05)
            return await cm.build_prompt(), cm.get_stats()

    first, stats = asyncio.run(session("You are brief."))
    assert stats["worker"]["processed"] >= 1 and "local_default" in adapter.saved
    again, _ = asyncio.run(session(""))
    assert again == first
    # sawtooth counts an unknown model with cl100k_base; so does chatfold
    assert stats["l0_tokens"] == chatfold._chatfold.count_text("You are brief.", "cl100k_base")


def test_explain_prompt_and_health_check_have_sawtooths_shape():
    reports = []
    for module in (sawtooth_memory, compat):
        with module.SyncContextManager("You are brief.") as m:
            m.add_message("user", "hello")
            trace = m.explain_prompt()
            health = m.health_check()
        reports.append((sorted(trace), sorted(trace["l0_system"]), sorted(trace["l3_semantic"]), sorted(health["checks"])))
        config = module.ContextManagerConfig.for_sync_script(soft_limit_tokens=500, hard_limit_tokens=500)
        with module.SyncContextManager("x", config) as m:
            with pytest.raises(ValueError):
                m.health_check()
    assert reports[0] == reports[1]


def test_the_langgraph_adapter_keeps_a_tool_result_only_beside_its_call():
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from chatfold.compat.sawtooth.integrations.langgraph import SawtoothLangGraphAdapter, build_sawtooth_graph

    class Prompted:
        """A context manager whose prompt is given."""

        def __init__(self, prompt):
            self.prompt, self.added = prompt, []

        async def add_message(self, role, content):
            self.added.append((role, content))

        async def build_prompt(self):
            return self.prompt

    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "tool", "content": "orphan"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "answer", "tool_call_id": "call_1"},
    ]
    adapter = SawtoothLangGraphAdapter(Prompted(prompt))
    compiled = asyncio.run(adapter.get_compiled_prompt())
    assert [type(m).__name__ for m in compiled] == ["SystemMessage", "AIMessage", "ToolMessage"]
    assert compiled[1].tool_calls[0]["args"] == {"q": "x"} and compiled[2].content == "answer"

    class Model:
        async def ainvoke(self, messages):
            return AIMessage(content=f"{len(messages)} messages")

    # Through chatfold's own context manager: the graph's model sees the
    # compiled prompt, and each message is added once however often it runs.
    async def run():
        async with compat.ContextManager("You are brief.", enable_events=False) as manager:
            graph = build_sawtooth_graph(Model(), SawtoothLangGraphAdapter(manager))
            state = await graph.ainvoke({"messages": [HumanMessage(content="hi", id="h1")], "llm_context": []})
            state["messages"].append(HumanMessage(content="again", id="h2"))
            state = await graph.ainvoke(state)
            return state, [m.content for m in manager.state.l1_working.messages]

    state, added = asyncio.run(run())
    assert added == ["hi", state["messages"][1].content, "again"]
    assert state["messages"][-1].content == f"{len(state['llm_context'])} messages"
