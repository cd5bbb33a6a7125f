"""Pinned messages and the budget recipe through the Python binding: the
core decides, the binding converts (the recipe's case table is the one the
Rust and Node tests run)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

import chatfold
from chatfold import BudgetUnreachable, Compactor, InvalidConfig

CASES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "recipe_cases.json"


def agent_loop(calls: int = 30) -> List[Dict[str, Any]]:
    history: List[Dict[str, Any]] = [
        {"role": "system", "content": "You are an SRE agent."},
        {"role": "user", "content": "Task: find why checkout p99 went from 180 ms to 840 ms."},
        {"role": "user", "content": "Start with the database hosts, please."},
    ]
    for i in range(calls):
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "query", "arguments": json.dumps({"host": f"db-{i}"})}}]})
        history.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"db-{i}: p99 {800 + i} ms, 12 slow queries"})
    return history


def after_summary(compaction: Any) -> List[Dict[str, Any]]:
    fates = compaction.report["fates"]
    return compaction.messages[fates.count("hoisted") + 1:]


@pytest.mark.parametrize("pin", ["first-user,last-user", ["first-user", "last-user"], [1, 2], [lambda m: m["role"] == "user"]])
def test_pins_stand_after_the_summary(pin: Any) -> None:
    history = agent_loop()
    result = Compactor(400, tokenizer="heuristic", pin=pin).compact(history)
    assert result.summarized and not result.over_budget
    assert after_summary(result)[:2] == history[1:3]
    assert result.report["fates"][1:3] == ["pinned", "pinned"]
    assert history == agent_loop()  # the caller's messages are untouched


def test_pins_that_pass_the_budget_and_bad_pins_are_errors() -> None:
    history = agent_loop()
    history[1]["content"] = "task " * 500
    with pytest.raises(BudgetUnreachable, match="pinned"):
        Compactor(200, tokenizer="heuristic", pin="first-user").compact(history)
    with pytest.raises(InvalidConfig, match="pin"):
        Compactor(200, pin="the-task")
    with pytest.raises(InvalidConfig, match="pin"):
        Compactor(200, pin=[True])
    with pytest.raises(InvalidConfig, match="pin"):
        Compactor(200, tokenizer="heuristic", pin=99).compact(agent_loop())


def test_pins_hold_in_the_async_compaction() -> None:
    history = agent_loop()

    async def summarize(request: chatfold.SummaryRequest) -> str:
        return "the hosts were queried"

    compactor = Compactor(400, tokenizer="heuristic", pin="last-user")
    result = asyncio.run(compactor.compact_async(history, summarize))
    assert after_summary(result)[0] == history[2]


def measure(m: List[Any]) -> Any:
    return (m[0], m[1])


@pytest.mark.parametrize("case", json.loads(CASES.read_text()), ids=lambda c: c["name"])
def test_the_recipe_decides_as_the_shared_table_says(case: Dict[str, Any]) -> None:
    settings: Dict[str, Any] = {"tokenizer": "heuristic"}
    if "summary" in case:
        settings.update(summary_role=case["summary"]["role"], summary_prefix=case["summary"]["prefix"])
    compactor = Compactor(1, **settings)
    try:
        aim = compactor.aim(
            case["messages"],
            keep=measure(case["keep"]),
            trigger=[measure(t) for t in case["triggers"]],
            window=case.get("window"),
            max_summary_tokens=case.get("max_summary_tokens"),
            measured=tuple(case["measured"]),
        )
    except InvalidConfig:
        assert case["expect"] == {"error": "InvalidConfig"}
        return
    first = {"limit": aim.limit, "budget": aim.budget, "keep_recent": aim.keep_recent}
    nexts = [aim.next(m) for m in case["next"]]
    assert {"first": first, "next": nexts} == case["expect"]
    folded = aim.compactor()
    assert folded.budget == aim.budget and folded.fold_to == aim.budget


def test_a_memory_keeps_its_pinned_task_across_folds() -> None:
    task = {"role": "user", "content": "Task: audit the IAM roles of account 4471-2209-8812."}
    memory = chatfold.RollingMemory(120, "extractive", tokenizer="heuristic", pin="first-user")
    memory.add_message(task)
    for i in range(40):
        memory.add_assistant(f"Checked role number {i}: fine.")
    assert memory.summary
    assert memory.buffer[0] == task
    with pytest.raises(InvalidConfig, match="pin"):
        chatfold.RollingMemory(120, pin="the-task")
