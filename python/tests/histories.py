"""Hypothesis strategies for chat histories (OpenAI-style dicts), in the
spirit of chatfold::testing: system prompts, plain turns, content parts,
unknown keys, and tool calls answered by their results."""

from hypothesis import strategies as st

words = st.text(alphabet="abcdefghij klmnop/._-0123456789", min_size=1, max_size=60)
extra = st.dictionaries(
    st.sampled_from(["x_trace", "cache_control", "weird"]),
    st.one_of(st.integers(-5, 5), st.booleans(), st.none(), words, st.lists(st.integers(0, 3), max_size=2)),
    max_size=2,
)


@st.composite
def turn(draw, i):
    kind = draw(st.sampled_from(["user", "assistant", "parts", "tools", "system"]))
    base = draw(extra)
    if kind == "parts":
        parts = [{"type": "text", "text": draw(words)}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
        return [{"role": "user", "content": parts, **base}]
    if kind == "tools":
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "search", "arguments": '{"q": "%s"}' % i}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call], **base},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": draw(words)},
        ]
    return [{"role": kind, "content": draw(words), **base}]


@st.composite
def history(draw, max_turns=40):
    n = draw(st.integers(1, max_turns))
    out = [{"role": "system", "content": "You are helpful."}] if draw(st.booleans()) else []
    for i in range(n):
        out.extend(draw(turn(i)))
    out.append({"role": "user", "content": draw(words)})
    return out


def without_strict(signature):
    """``signature`` less a keyword-only ``strict=False``: the one keyword a
    compat module adds to the original's, for chatfold's stricter behaviour."""
    import inspect

    params = [
        p
        for p in signature.parameters.values()
        if not (p.name == "strict" and p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is False)
    ]
    return signature.replace(parameters=params)
