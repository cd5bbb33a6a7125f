"""The needle conversation through Python chatcram and rollmem.

Run by `cargo bench --bench needle --features cli` with the conversation it
wrote (`needle.json`: messages, needles, budget). Same lossy summarizer as
the Rust side: the first sentence of each folded turn, 60 words at most, the
previous summary dropped. Token counts with tiktoken o200k (its vocabulary
from tiktoken-rs's bundled copy, as in benches/peers/compare.py).
"""

import json
import pathlib
import re
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "peers"))
from compare import tiktoken_cache  # noqa: E402


def first_sentences(texts):
    words = []
    for text in texts:
        first = re.split(r"(?<=[.?!])", text, maxsplit=1)[0]
        words.extend(first.split())
    return " ".join(words[:60]) or "Earlier turns."


def text_of(m):
    parts = [m.get("content") or ""]
    parts += [c["function"]["arguments"] for c in m.get("tool_calls") or []]
    return "\n".join(parts)


def recall(texts, needles):
    joined = "\n".join(texts)
    return sum(1 for n in needles if n in joined)


def turns(messages):
    return [end for end in range(2, len(messages) + 1) if end == len(messages) or messages[end]["role"] == "user"]


def main():
    data = json.loads(pathlib.Path(sys.argv[1]).read_text())
    messages, needles, budget = data["messages"], data["needles"], data["budget"]
    with tempfile.TemporaryDirectory() as cache:
        tiktoken_cache(cache)
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
        count = lambda text: len(enc.encode(text, disallowed_special=()))
        rows = []

        from chatcram import Compactor
        from chatcram.tokenizers import tiktoken_tokenizer

        def lossy_transcript(transcript):
            lines = [re.sub(r"^[a-z_]+: ", "", line) for line in transcript.splitlines() if line.strip()]
            return first_sentences(lines)

        compactor = Compactor(budget=budget, summarize=lossy_transcript, tokenizer=tiktoken_tokenizer("gpt-4o"))
        context, done = [], 0
        for end in turns(messages):
            # chatcram reads role and content only: tool calls go in as text.
            context += [{"role": m["role"], "content": text_of(m)} for m in messages[done:end]]
            done = end
            context = list(compactor.compact(context).messages)
        texts = [m["content"] for m in context]
        rows.append(("chatcram, stateless", recall(texts, needles), sum(count(t) for t in texts)))

        from rollmem import RollingMemory, ToolCall

        memory = RollingMemory(
            max_tokens=1300,
            summarize_fn=lambda previous, folded: first_sentences([m.content for m in folded]),
            token_counter=count,
        )
        for m in messages[1:]:
            calls = tuple(
                ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                for c in m.get("tool_calls") or []
            )
            memory.add_message(m["role"], m.get("content") or "", tool_calls=calls, tool_call_id=m.get("tool_call_id"))
        texts = [messages[0]["content"]] + [m.content + "\n" + "\n".join(c.arguments for c in m.tool_calls) for m in memory.get_messages()]
        rows.append(("rollmem RollingMemory", recall(texts, needles), sum(count(t) for t in texts)))

    for mode, found, tokens in rows:
        print(f"{mode:<38} {100.0 * found / len(needles):>7.1f}% {tokens:>14}")


if __name__ == "__main__":
    main()
