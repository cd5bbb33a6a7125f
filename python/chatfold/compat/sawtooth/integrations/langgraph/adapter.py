"""sawtooth-memory's ``integrations.langgraph.adapter``: LangChain messages
in and out of a :class:`~chatfold.compat.sawtooth.ContextManager`.

As sawtooth's (it needs ``langchain-core``): :meth:`sync_state` adds each
message it has not seen (by its ``id``) to the context manager, as a
``(role, text)`` turn; :meth:`get_compiled_prompt` turns the context
manager's prompt back into LangChain messages. A tool result is kept only
beside the assistant message that made its call: a prompt entry that
carries ``tool_calls`` (or a tool result's ``tool_call_id``) keeps them,
and any other tool result, whose call is not in the prompt, is left out so
that no provider sees an orphan.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

logger = logging.getLogger(__name__)

__all__ = ["SawtoothLangGraphAdapter"]

# LangChain's message classes and the roles they are, both ways.
_ROLES = {HumanMessage: "user", AIMessage: "assistant", SystemMessage: "system", ToolMessage: "tool"}
_CLASSES = {role: cls for cls, role in _ROLES.items()}


def _extract_content(msg: BaseMessage) -> str:
    """A message's content as text: a string as it is; a list of blocks one
    a line (a block's ``text`` or ``content``, else its JSON); anything else
    as JSON."""
    content = msg.content
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                parts.append(block.get("text") or block.get("content") or json.dumps(block, ensure_ascii=False))
            else:
                parts.append(json.dumps(block, default=str, ensure_ascii=False))
        return "\n".join(part for part in parts if part)
    return json.dumps(content, default=str, ensure_ascii=False)


def _msg_id(msg: BaseMessage) -> str:
    """A message's ``id``, or its object identity when it has none (a
    message made outside a graph)."""
    return msg.id if msg.id else str(id(msg))


def _call_ids(message: BaseMessage) -> List[str]:
    """The ids of the tool calls an assistant message makes."""
    calls = getattr(message, "tool_calls", None) or []
    ids = (call.get("id") if isinstance(call, Mapping) else getattr(call, "id", None) for call in calls)
    return [i for i in ids if i]


def _to_message(item: Mapping[str, Any]) -> BaseMessage:
    """One prompt entry as a LangChain message (an unknown role: a human
    one, as sawtooth does)."""
    role, content = item.get("role", "user"), item.get("content", "")
    cls = _CLASSES.get(role)
    if cls is None:
        logger.warning("get_compiled_prompt: unknown role %r, made a HumanMessage", role)
        return HumanMessage(content=content)
    if cls is ToolMessage:
        return ToolMessage(content=content, tool_call_id=item.get("tool_call_id") or "")
    if cls is AIMessage and item.get("tool_calls"):
        calls = [_lc_call(call) for call in item["tool_calls"]]
        return AIMessage(content=content, tool_calls=calls)
    return cls(content=content)


def _lc_call(call: Mapping[str, Any]) -> Dict[str, Any]:
    """An OpenAI tool call as LangChain's (its arguments parsed)."""
    function = call.get("function") or {}
    arguments = function.get("arguments", call.get("arguments", "{}"))
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except ValueError:
        args = {"input": arguments}
    return {"name": function.get("name", call.get("name", "")), "args": args, "id": call.get("id")}


class SawtoothLangGraphAdapter:
    """Connects one LangGraph session to one context manager; pass the same
    instance to the graph's nodes. Safe to sync on every iteration: a
    message is added once."""

    def __init__(self, context_manager: Any) -> None:
        self._context_manager = context_manager
        self._processed_ids: set[str] = set()

    async def sync_state(self, messages: Sequence[BaseMessage]) -> None:
        """Adds the messages not added before (by id) to the context
        manager; a message of a type with no role is skipped, once."""
        for msg in messages:
            msg_id = _msg_id(msg)
            if msg_id in self._processed_ids:
                continue
            role = _ROLES.get(type(msg))
            if role is None:
                logger.warning("sync_state: skipping a %s (id=%s)", type(msg).__name__, msg_id)
            else:
                await self._context_manager.add_message(role, _extract_content(msg))
            self._processed_ids.add(msg_id)

    async def get_compiled_prompt(self) -> List[BaseMessage]:
        """The context manager's prompt as LangChain messages, without tool
        results whose call is not among them."""
        messages = [_to_message(item) for item in await self._context_manager.build_prompt()]
        called = {i for m in messages if isinstance(m, AIMessage) for i in _call_ids(m)}
        kept = [m for m in messages if not isinstance(m, ToolMessage) or m.tool_call_id in called]
        if len(kept) < len(messages):
            logger.info("get_compiled_prompt: left out %d tool result(s) without their call", len(messages) - len(kept))
        return kept
