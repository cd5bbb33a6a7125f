"""The lazy reading of a plain history (a list of ``{"role", "content"}``
dicts, the ledger off, a Python summarizer) gives exactly what the whole
reading gives: the same messages, report and summarizer request. A tuple
of the same dicts is read whole, so the two are compared on every input."""

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import chatfold
from chatfold import Compactor

PREFIX = "Summary of earlier conversation:\n"

roles = st.sampled_from(["user", "assistant", "user", "assistant", "system", "tool", "developer", "critic"])
texts = st.one_of(
    st.text(max_size=60),
    st.builds(lambda t: PREFIX + t, st.text(max_size=30)),  # summary-like
    st.builds(lambda n, w: " ".join([w] * n), st.integers(1, 200), st.sampled_from(["word", "Gyeongbokgung", "é", "🙂", "x" * 40])),
)
plain = st.lists(st.fixed_dictionaries({"role": roles, "content": texts}), max_size=80)


def run(compactor, messages):
    """The result and what the summarizer was asked, or the exception."""
    asked = []

    def summarize(request):
        asked.append((request.previous_summary, request.messages, request._rendered(), request.allowance, len(request)))
        return "the earlier turns, in short"

    try:
        result = compactor.compact(messages, summarize)
    except chatfold.ChatfoldError as e:
        return type(e), str(e), asked
    return result, asked


@settings(max_examples=300, deadline=None)
# Only a previous summary before the cut: its text is carried, no call made.
@example([{"role": "system", "content": PREFIX + "00000000"}], 1, None, "heuristic", "chat", False)
@given(plain, st.integers(1, 600), st.one_of(st.none(), st.integers(0, 400)), st.sampled_from(["heuristic", "o200k_base"]), st.sampled_from(["chat", "rendered"]), st.booleans())
def test_the_lazy_reading_gives_what_the_whole_reading_gives(messages, budget, keep_recent, tokenizer, counting, strict):
    try:
        compactor = Compactor(budget, keep_recent, tokenizer=tokenizer, counting=counting, ledger=False, strict=strict, min_summary_tokens=1)
    except chatfold.ChatfoldError:
        assume(False)  # a configuration refused when made
    lazy, whole = run(compactor, messages), run(compactor, tuple(messages))
    if isinstance(whole[0], type):
        assert lazy == whole
        return
    (a, asked_a), (b, asked_b) = lazy, whole
    assert a.messages == b.messages
    assert (a.summarized, a.tokens_after, a.over_budget, a.summary_truncated, a.tokens_before_exact) == (
        b.summarized, b.tokens_after, b.over_budget, b.summary_truncated, b.tokens_before_exact)
    if a.tokens_before_exact:
        assert a.tokens_before == b.tokens_before
    assert a.report == b.report
    assert asked_a == asked_b


def test_a_long_history_folds_through_the_lazy_reading_and_says_what_it_folded():
    messages = [{"role": "system", "content": "Be brief."}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: what to see in Seoul?"} for i in range(5000)]
    messages.insert(2500, {"role": "system", "content": "Mind the budget."})
    seen = []

    def summarize(request):
        seen.append((request._rendered(), len(request)))
        return "they talked about Seoul"

    result = Compactor(300, tokenizer="o200k_base", ledger=False).compact(messages, summarize)
    fates = result.report["fates"]
    assert len(fates) == len(messages)
    assert fates[0] == "hoisted" and fates[2500] == "hoisted"
    cut = result.report["cut"]
    assert all(f == "kept" for f in fates[cut:]) and "kept" not in fates[:cut]
    assert result.messages[:2] == [messages[0], messages[2500]]
    assert result.messages[0] is messages[0] and result.messages[-1] is messages[-1]
    folded = [m for i, m in enumerate(messages[:cut]) if i not in (0, 2500)]
    assert seen == [("\n".join(f"{m['role']}: {m['content']}" for m in folded), len(folded))]
    assert result.tokens_after <= 300


def test_a_lone_surrogate_is_an_error_not_a_crash():
    messages = [{"role": "user", "content": "x" * 50} for _ in range(50)] + [{"role": "user", "content": "\ud800"}]
    with pytest.raises(UnicodeEncodeError):
        Compactor(100, tokenizer="heuristic", ledger=False).compact(messages, lambda r: "s")


def test_a_summarizer_that_changes_the_input_list_changes_nothing_returned():
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 5} for i in range(200)]
    expected = Compactor(100, tokenizer="heuristic", ledger=False).compact(list(messages), lambda r: "short").messages

    def meddling(request):
        messages.clear()
        return "short"

    got = Compactor(100, tokenizer="heuristic", ledger=False).compact(messages, meddling).messages
    assert got == expected


def test_a_reused_fold_is_found_by_what_the_messages_say_not_by_their_roles():
    """With summaries reused, a history is read whole: two histories alike
    but in their folded middle get their own summaries."""

    def history(word):
        return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{word} {i} " * 8} for i in range(120)]

    compactor = Compactor(200, tokenizer="heuristic", ledger=False, reuse=True)
    asked = []

    def summarize(request):
        asked.append(request.messages[0]["content"])
        return f"summary {len(asked)}"

    first = compactor.compact(history("apple"), summarize)
    second = compactor.compact(history("pear"), summarize)
    assert [a.split()[0] for a in asked] == ["apple", "pear"]
    assert first.messages[0]["content"] != second.messages[0]["content"]
