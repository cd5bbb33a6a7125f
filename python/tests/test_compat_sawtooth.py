"""chatfold.compat.sawtooth against sawtooth-memory 0.3.0: the same names,
signatures and defaults, and the hard limit kept where sawtooth passes it."""

import asyncio
import dataclasses
import inspect
import tempfile
import pathlib

import sawtooth_memory

import chatfold
from chatfold.compat import sawtooth as compat


def test_the_same_names_signatures_and_defaults():
    for name in compat.__all__:
        assert hasattr(sawtooth_memory, name)
    theirs = {k: (f.default_factory() if f.default_factory else f.default) for k, f in sawtooth_memory.ContextManagerConfig.model_fields.items()}
    ours = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default) for f in dataclasses.fields(compat.ContextManagerConfig)}
    assert ours == theirs
    assert [p.value for p in compat.Provider] == [p.value for p in sawtooth_memory.Provider]
    assert dataclasses.asdict(compat.OllamaConfig()) == sawtooth_memory.OllamaConfig().model_dump()
    for method in ["start", "stop", "add_message", "build_prompt", "get_stats"]:
        a, b = getattr(compat.ContextManager, method), getattr(sawtooth_memory.ContextManager, method)
        assert list(inspect.signature(a).parameters) == list(inspect.signature(b).parameters), method
        assert inspect.iscoroutinefunction(a) == inspect.iscoroutinefunction(b), method
    assert compat.ContextManagerConfig.for_sync_script().soft_limit_tokens == 2000


def test_the_prompt_never_passes_the_hard_limit_while_compression_is_slow():
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
                assert prompt[0] == {"role": "system", "content": "You are a careful agent."}
                assert prompt[-1]["content"].startswith(f"turn {i}:")
            stats = cm.get_stats()
            assert stats["l1_message_count"] == 200  # hidden from the prompt, not lost
            release.set()
            await cm._memory.fold_now()
            assert cm.get_stats()["worker"]["processed"] >= 1

    asyncio.run(main())


def test_sawtooth_on_the_same_turns_for_reference():
    """The original on the same turns, with its compressor as slow as ours:
    its prompt holds the system prompt first and ends with the same turn
    (its layout differs: L0 and the ledger in one system message)."""
    from sawtooth_memory import compressor

    async def compress(self, messages_text, *, protected_entities=None):
        await asyncio.sleep(0)
        return {"narrative_summary": "earlier turns", "extracted_entities": {}}

    async def ping(self):
        return None

    compressor.OllamaCompressor.compress, compressor.OllamaCompressor.ping = compress, ping

    async def main():
        journal = pathlib.Path(tempfile.mkdtemp()) / "journal.jsonl"
        config = sawtooth_memory.ContextManagerConfig(soft_limit_tokens=300, hard_limit_tokens=600)
        async with sawtooth_memory.ContextManager("You are a careful agent.", config, journal_path=journal) as cm:
            for i in range(50):
                await cm.add_message("user" if i % 2 == 0 else "assistant", f"turn {i}: read /srv/data/file-{i}.csv")
            prompt = await cm.build_prompt()
        assert "You are a careful agent." in prompt[0]["content"]
        assert prompt[-1]["content"] == "turn 49: read /srv/data/file-49.csv"

    import logging

    logging.disable(logging.CRITICAL)
    try:
        asyncio.run(main())
    finally:
        logging.disable(logging.NOTSET)
