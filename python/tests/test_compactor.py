"""The Compactor through Python: DESIGN.md's rules, lossless messages,
summarizers' exceptions, errors, async compaction."""

import asyncio
import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatfold
from chatfold import Compactor

from histories import history

SUMMARY_PREFIX = "Summary of earlier conversation:"


def is_summary(m):
    return isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX)


def short(request):
    return f"{len(request)} earlier messages"


@settings(max_examples=60, deadline=None)
@given(history(), st.integers(60, 400))
def test_the_rules_hold_through_python(messages, budget):
    before = copy.deepcopy(messages)
    compactor = Compactor(budget, tokenizer="heuristic")
    result = compactor.compact(messages, short)
    assert messages == before, "the caller's messages are unchanged"
    out = result.messages
    if not result.summarized:
        assert out == messages  # rule 1: unchanged when it fits
        return
    summaries = [m for m in out if is_summary(m)]
    assert len(summaries) == 1  # rule 7
    at = out.index(summaries[0])
    kept = out[at + 1 :]
    assert kept == messages[len(messages) - len(kept) :]  # rule 3: a verbatim suffix
    assert kept[-1] == messages[-1]  # rule 5
    systems = [m for m in messages[: len(messages) - len(kept)] if m["role"] == "system"]
    assert out[:at] == systems  # rule 2: system messages hoisted, verbatim, in order
    ids = {c["id"] for m in kept for c in m.get("tool_calls") or []}
    for m in kept:  # rule 3: no result kept without its call
        if m.get("tool_call_id"):
            assert m["tool_call_id"] in ids
    if not result.over_budget:
        assert result.tokens_after <= budget  # rule 6
        assert compactor.count(out) == result.tokens_after


@settings(max_examples=40, deadline=None)
@given(history(max_turns=10))
def test_messages_come_back_losslessly(messages):
    result = Compactor(100_000, tokenizer="heuristic").compact(messages)
    assert not result.summarized
    assert result.messages == messages
    # Folded and fed back, the kept messages keep every key and part.
    small = Compactor(40, tokenizer="heuristic").compact(messages, short)
    for m in small.messages:
        assert is_summary(m) or m in messages


def test_a_summary_is_rolled_forward_not_piled_up():
    compactor = Compactor(200, tokenizer="heuristic")
    history = [{"role": "system", "content": "Be brief."}]
    for i in range(30):
        history.append({"role": "user", "content": f"question {i} about the trip " * 4})
        history.append({"role": "assistant", "content": f"answer {i} " * 6})
        history = compactor.compact(history, lambda r: f"{len(r)} turns; before: {r.previous_summary is not None}").messages
        assert sum(is_summary(m) for m in history) <= 1
    assert compactor.count(history) <= 200


def test_a_summarizers_exception_propagates_as_itself_and_nothing_changes():
    class Down(Exception):
        pass

    messages = [{"role": "user", "content": "word " * 200}, {"role": "user", "content": "last"}]
    before = copy.deepcopy(messages)

    def fail(request):
        raise Down("llm down")

    with pytest.raises(Down) as caught:
        Compactor(30, tokenizer="heuristic").compact(messages, fail)
    assert str(caught.value) == "llm down"
    assert messages == before


def test_the_request_carries_what_a_summarizer_needs():
    seen = {}

    def summarize(request):
        seen.update(
            previous=request.previous_summary,
            messages=request.messages,
            transcript=request.transcript,
            allowance=request.allowance,
        )
        return "the gist"

    messages = [{"role": "user", "content": f"turn {i} " * 20} for i in range(10)]
    result = Compactor(100, tokenizer="heuristic").compact(messages, summarize)
    assert result.summarized
    assert seen["previous"] is None
    assert seen["messages"] == messages[: len(seen["messages"])]
    assert "turn 0" in seen["transcript"]
    assert 0 < seen["allowance"] <= 100


def test_a_summarizer_must_return_text():
    with pytest.raises(TypeError):
        Compactor(30, tokenizer="heuristic").compact([{"role": "user", "content": "x " * 200}] * 3, lambda r: 42)


def test_errors_form_a_hierarchy_with_details():
    with pytest.raises(chatfold.InvalidConfig) as caught:
        Compactor(0)
    assert isinstance(caught.value, chatfold.ChatfoldError) and isinstance(caught.value, ValueError)
    assert caught.value.setting == "budget"
    with pytest.raises(chatfold.InvalidConfig):
        Compactor(100, keep_recent=500)
    with pytest.raises(chatfold.InvalidMessage) as caught:
        Compactor(100).compact([{"role": "user", "content": "hi"}, {"role": 7}])
    assert (caught.value.index, caught.value.field) == (1, "role")
    with pytest.raises(chatfold.InvalidConfig):
        Compactor(100, tokenizer="no-such-tokenizer")
    with pytest.raises(chatfold.SummarizerError):
        Compactor(30, tokenizer="heuristic").compact([{"role": "user", "content": "x " * 200}] * 3, lambda r: "   ")
    with pytest.raises(chatfold.BudgetUnreachable) as caught:
        Compactor(10, tokenizer="heuristic", strict=True).compact([{"role": "user", "content": "x " * 500}])
    assert caught.value.budget == 10 and caught.value.required > 10
    with pytest.raises(TypeError):
        Compactor(100).compact([{"role": "user", "content": object()}])


def test_a_counters_exception_propagates():
    def count(text):
        raise ZeroDivisionError("bad counter")

    with pytest.raises(ZeroDivisionError):
        Compactor(100, tokenizer=count).compact([{"role": "user", "content": "hi"}])


def test_a_python_counter_counts():
    words = Compactor(20, tokenizer=lambda text: len(text.split()))
    assert words.count([{"role": "user", "content": "one two three"}]) == 3 + 1 + 3 + 3


def test_o200k_counts_as_openai_does():
    messages = [{"role": "user", "content": "hello world"}]
    assert Compactor(100).count(messages) == chatfold.count_tokens(messages, "o200k_base") == 3 + 1 + 2 + 3


def test_anthropic_bodies_round_trip_and_compact():
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be terse."}],
        "messages": [{"role": "user", "content": f"question {i} " * 30} if i % 2 == 0 else {"role": "assistant", "content": f"answer {i}"} for i in range(21)],
    }
    same = Compactor(100_000, format="anthropic", tokenizer="heuristic").compact(body)
    assert same.messages == body
    result = Compactor(200, format="anthropic", tokenizer="heuristic").compact(body, short)
    out = result.messages
    assert out["model"] == "claude-x" and out["max_tokens"] == 100
    assert out["messages"][0]["role"] == "user"
    assert out["messages"][-1] == body["messages"][-1]
    assert any(SUMMARY_PREFIX in (b.get("text") or "") for b in out["system"])


def test_the_report_is_a_dict():
    messages = [{"role": "user", "content": f"turn {i} " * 20} for i in range(10)]
    report = Compactor(100, tokenizer="heuristic").compact(messages, short).report
    assert len(report["fates"]) == 10
    assert set(report["fates"]) <= {"kept", "folded", "hoisted", "previous_summary"}
    assert report["folds"] == 1


def test_compact_async_awaits_the_coroutine():
    calls = []

    async def summarize(request):
        await asyncio.sleep(0)
        calls.append(len(request))
        return "async gist"

    messages = [{"role": "user", "content": f"turn {i} " * 20} for i in range(10)]
    compactor = Compactor(100, tokenizer="heuristic")
    result = asyncio.run(compactor.compact_async(messages, summarize))
    assert result.summarized and calls
    assert result.messages == compactor.compact(messages, lambda r: "async gist").messages


def test_compact_async_raises_the_coroutines_exception():
    async def summarize(request):
        raise LookupError("gone")

    with pytest.raises(LookupError):
        asyncio.run(Compactor(30, tokenizer="heuristic").compact_async([{"role": "user", "content": "x " * 200}] * 3, summarize))


def test_concurrent_threads_compact_with_the_gil_released():
    import threading

    compactor = Compactor(500)
    messages = [{"role": "user", "content": f"turn {i} " * 30} for i in range(2000)]
    results = []
    threads = [threading.Thread(target=lambda: results.append(compactor.compact(messages))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r.summarized for r in results)
    assert len({repr(r.messages) for r in results}) == 1


def test_the_http_summarizers_are_available_by_name_and_fail_cleanly():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    messages = [{"role": "user", "content": "x " * 200}] * 3
    before = copy.deepcopy(messages)
    for make in (chatfold.OpenAISummarizer, chatfold.AnthropicSummarizer):
        summarizer = make(f"http://127.0.0.1:{port}", "some-model", api_key="k", timeout=2.0, retries=0)
        with pytest.raises(chatfold.SummarizerError):
            Compactor(30, tokenizer="heuristic").compact(messages, summarizer)
        with pytest.raises(chatfold.SummarizerError):
            asyncio.run(Compactor(30, tokenizer="heuristic").compact_async(messages, summarizer))
        assert messages == before


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["system", "user", "assistant", "developer"]), st.text(min_size=0, max_size=80)), min_size=1, max_size=30), st.integers(20, 300))
def test_plain_messages_read_as_any_others(pairs, budget):
    plain = [{"role": r, "content": c} for r, c in pairs]
    marked = [{"role": r, "content": c, "x": 1} for r, c in pairs]
    compactor = Compactor(budget, tokenizer="heuristic")
    a, b = compactor.compact(plain, short), compactor.compact(marked, short)
    strip = lambda ms: [{k: v for k, v in m.items() if k != "x"} for m in ms]
    assert strip(a.messages) == strip(b.messages)
    assert (a.summarized, a.tokens_after) == (b.summarized, b.tokens_after)


def turns(n):
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about order ORD-{1000 + i} and its shipping"}
        for i in range(n)
    ]


def test_between_folds_the_output_grows_at_its_end_and_says_so():
    compactor = Compactor(400, tokenizer="heuristic")
    assert compactor.fold_to == 200  # half the budget by default
    first = compactor.compact(turns(60), short)
    assert first.summarized and first.report["prefix"] == "rewritten"
    assert first.tokens_after <= 200 + 40  # down to the target, not to the budget
    held = list(first.messages) + [{"role": "user", "content": "and where is it now?"}]
    second = compactor.compact(held, short)
    assert second.report["prefix"] == "unchanged"
    assert second.messages == held
    assert 0 < second.prefix_tokens < second.tokens_after


def rewrites(compactor, n=30):
    """How many of `n` exchanges, each sent back with chatfold's output,
    rewrite the prompt's prefix (the built-in summarizer, which fills its
    allowance)."""
    held, count = turns(40), 0
    for i in range(n):
        result = compactor.compact(held, "extractive")
        count += result.report["prefix"] == "rewritten"
        held = list(result.messages) + [{"role": "user", "content": f"question {i} about ORD-{i}"}]
    return count


def test_folding_to_the_budget_rewrites_the_prefix_more_often():
    stepped = rewrites(Compactor(400, tokenizer="heuristic"))
    at_budget = rewrites(Compactor(400, tokenizer="heuristic", fold_to=400))
    assert 1 <= stepped < at_budget
