"""chatfold's framework drop-ins against the originals, in one run: the same
scripted agents through LangChain's SummarizationMiddleware and chatfold's,
and through langmem's SummarizationNode and chatfold's, every request the
model receives inspected. Prints, for each side: model calls, calls over the
trigger (system prompt and tool schemas counted, LangChain's approximate
counter), calls with a tool message whose call is not there (or a call
without its result), calls without the user's newest question, and how many
of the first turn's identifiers the final summary holds.

    python benches/python/drop_ins.py

Needs langchain, langgraph and langmem beside chatfold (the package's test
environment has them).
"""

from __future__ import annotations

import pathlib
import sys
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python" / "tests"))

from frameworks import FIRST_TURN_IDS, Scripted, Summarizer, is_question, lookup, orphans, question  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import SummarizationMiddleware as LangChains  # noqa: E402
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph.prebuilt.chat_agent_executor import AgentState  # noqa: E402
from langmem.short_term import SummarizationNode as Langmems  # noqa: E402

from chatfold.langchain import SummarizationMiddleware as Ours  # noqa: E402
from chatfold.langgraph import SummarizationNode as OurNode  # noqa: E402

SYSTEM = "You are a careful support agent for an online shop. " * 12
TRIGGER, TURNS = 3000, 20


class State(AgentState):
    context: dict


def langchain_run(make):
    model, summarizer = Scripted(calls=3, rounds=2), Summarizer()
    middleware = make(summarizer, trigger=("tokens", TRIGGER), keep=("messages", 20))
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver())
    for i in range(TURNS):
        state = agent.invoke({"messages": [question(i)]}, {"configurable": {"thread_id": "b"}})
    return model, state["messages"][0].content


def langgraph_run(make):
    model, summarizer = Scripted(calls=3, rounds=2), Summarizer()
    hook = make(model=summarizer, max_tokens=TRIGGER, max_summary_tokens=400, output_messages_key="llm_input_messages")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [lookup], pre_model_hook=hook, state_schema=State, checkpointer=InMemorySaver())
    for i in range(TURNS):
        state = agent.invoke({"messages": [question(i)]}, {"configurable": {"thread_id": "b"}})
    running = state.get("context", {}).get("running_summary")
    return model, running.summary if running else ""


def inspect(name, model, summary, tools):
    calls = model.seen
    over = sum(1 for m in calls if count_tokens_approximately(m, tools=tools) >= TRIGGER)
    broken = sum(1 for m in calls if orphans(m))
    lost = sum(1 for m in calls if not any(is_question(x) for x in m))
    kept = sum(1 for i in FIRST_TURN_IDS if i in summary)
    print(f"  {name:<10} calls {len(calls):>3}  over the trigger {over:>3}  broken pairs {broken:>3}  "
          f"no question {lost:>3}  first-turn ids in the summary {kept} of {len(FIRST_TURN_IDS)}")


def main():
    for title, run, sides, tools in [
        ("LangChain create_agent, SummarizationMiddleware", langchain_run, [("langchain", LangChains), ("chatfold", Ours)], [lookup]),
        ("LangGraph create_react_agent, SummarizationNode", langgraph_run, [("langmem", Langmems), ("chatfold", OurNode)], None),
    ]:
        print(f"{title}: {TURNS} turns, 3 parallel calls twice a turn, trigger {TRIGGER} tokens")
        for name, make in sides:
            inspect(name, *run(make), tools)


if __name__ == "__main__":
    main()
