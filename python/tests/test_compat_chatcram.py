"""chatfold.compat.chatcram against chatcram 0.1.0 itself: the same names and
signatures, the same results where chatcram is right, and its defect fixed."""

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

import chatcram
import chatcram.tokenizers
import chatfold.compat.chatcram as compat
from histories import without_strict


def summarize(transcript):
    return f"{len(transcript.splitlines())} lines, starting {transcript[:12]!r}"


def test_the_same_public_names_and_signatures():
    assert sorted(compat.__all__) == sorted(chatcram.__all__)
    for name in chatcram.__all__:
        theirs, ours = getattr(chatcram, name), getattr(compat, name)
        if inspect.isclass(theirs) and name != "Message":
            for attr, value in vars(theirs).items():
                if callable(value) and (not attr.startswith("_") or attr == "__init__"):
                    assert without_strict(inspect.signature(getattr(ours, attr))) == inspect.signature(value), f"{name}.{attr}"
        elif inspect.isfunction(theirs):
            assert inspect.signature(ours) == inspect.signature(theirs)
    assert {f.name for f in compat.CompactionResult.__dataclass_fields__.values()} == set(chatcram.CompactionResult.__dataclass_fields__)
    assert __import__("chatfold.compat.chatcram.tokenizers") and __import__("chatfold.compat.chatcram.compactor")


turns = st.lists(st.integers(1, 60), min_size=1, max_size=40)


def history(lengths, system):
    out = [{"role": "system", "content": "You are terse."}] if system else []
    for i, n in enumerate(lengths):
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(f"w{i}x{j}" for j in range(n))})
    return out


@settings(max_examples=80, deadline=None)
@given(turns, st.integers(40, 1500), st.booleans(), st.sampled_from([None, 0.25, 0.5]))
def test_the_same_results_where_chatcram_is_right(lengths, budget, system, share):
    messages = history(lengths, system)
    keep = None if share is None else int(budget * share)
    theirs = chatcram.Compactor(budget, summarize, keep_recent=keep).compact(messages)
    ours = compact = compat.Compactor(budget, summarize, keep_recent=keep).compact(messages)
    assert isinstance(ours, compat.CompactionResult)
    if not theirs.summarized:
        if theirs.used_tokens <= budget:
            assert ours == compat.CompactionResult(messages, theirs.used_tokens, False)
        return
    kept = theirs.messages[(2 if system else 1):]
    right = theirs.used_tokens <= budget and kept[0]["role"] == "user"
    if right:
        assert ours.messages == theirs.messages
        assert (ours.used_tokens, ours.summarized, ours.summary) == (theirs.used_tokens, True, theirs.summary)
    elif compact.summarized:
        # chatfold's fixes: within the budget when reachable, a user turn first.
        assert ours.used_tokens <= budget or len(ours.messages) <= (3 if system else 2)
        first = ours.messages[(2 if system else 1):][0]
        assert first["role"] == "user" or first is messages[-1] or first == messages[-1]


def test_summaries_do_not_pile_up_as_they_do_in_chatcram():
    def grow(module):
        compactor = module.Compactor(150, summarize)
        history = []
        for i in range(40):
            history = compactor.compact(history + [{"role": "user", "content": f"question {i} " * 8}, {"role": "assistant", "content": f"answer {i} " * 8}]).messages
        return history, compactor

    theirs, c = grow(chatcram)
    ours, _ = grow(compat)
    count = lambda h: sum(m["content"].startswith("Summary of earlier conversation:") for m in h)
    assert count(theirs) > 1  # chatcram's defect: one more summary per compaction
    assert count(ours) == 1
    tokenizer = chatcram.tokenizers.HeuristicTokenizer()
    used = sum(tokenizer.count(f"{m['role']}: {m['content']}") for m in ours)
    assert used <= 150


def test_an_empty_summary_leaves_the_history_as_chatcram_does():
    messages = history([50] * 10, True)
    for module in (chatcram, compat):
        result = module.Compactor(100, lambda t: "  ").compact(messages)
        assert result.summarized is False and result.messages == messages


def test_tiktoken_tokenizer_counts_in_rust_as_tiktoken_does():
    theirs = chatcram.tiktoken_tokenizer("gpt-4o")
    ours = compat.tiktoken_tokenizer("gpt-4o")
    for text in ["hello world", "Ünïcödé and código: 東京 in 2024", "def f(x):\n    return x ** 2\n"]:
        assert ours.count(text) == theirs.count(text)
    messages = history([30] * 30, True)
    a = chatcram.Compactor(400, summarize, tokenizer=theirs).compact(messages)
    b = compat.Compactor(400, summarize, tokenizer=ours).compact(messages)
    assert b.summarized and b.used_tokens <= 400
    if a.messages[2]["role"] == "user":
        assert a.messages == b.messages


def test_the_same_errors_for_bad_arguments():
    import pytest

    for module in (chatcram, compat):
        with pytest.raises(ValueError):
            module.Compactor(0, summarize)
        with pytest.raises(ValueError):
            module.Compactor(10, summarize, keep_recent=-1)
        with pytest.raises(ValueError):
            module.HeuristicTokenizer(0)


def test_the_budget_only_triggers_as_in_chatcram_and_strict_is_chatfolds():
    """Over a budget no summary can meet, chatcram folds what keep_recent
    leaves and takes any summary role; strict=True keeps chatfold's rules."""
    import chatfold

    convo = [
        {"role": "system", "content": "you are helpful"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3 latest"},
    ]
    tok = chatcram.HeuristicTokenizer(chars_per_token=1.0)
    for keep_recent in (20, 40):
        kwargs = dict(keep_recent=keep_recent, summary_role="assistant", summary_prefix="TL;DR: ")
        theirs = chatcram.Compactor(40, lambda t: "SUMMARY", tokenizer=tok, **kwargs).compact(convo)
        ours = compat.Compactor(40, lambda t: "SUMMARY", tokenizer=compat.HeuristicTokenizer(1.0), **kwargs).compact(convo)
        assert (ours.messages, ours.summarized, ours.summary) == (theirs.messages, theirs.summarized, theirs.summary)
    strict = compat.Compactor(40, lambda t: "SUMMARY", keep_recent=20, tokenizer=compat.HeuristicTokenizer(1.0), strict=True)
    result = strict.compact(convo)
    assert result.summarized is False and result.messages == convo
    try:
        compat.Compactor(40, lambda t: "S", summary_role="assistant", strict=True)
    except chatfold.InvalidConfig:
        pass
    else:
        raise AssertionError("strict=True took an assistant summary role")
