"""rollmem 0.6.0's memories over chatfold's (``chatfold.compat.rollmem``).

Each class keeps rollmem's constructor, methods and ``from_dict``; the state
lives in a chatfold memory that counts each message as rollmem does (the
token counter over :meth:`Message.token_text`, words by default), evicts
whole tool-call units aligned to a user turn, and folds through the
summarizer with nothing lost on failure.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ... import _chatfold
from ..._drive import drive
from .message import ASSISTANT, SYSTEM, TOOL, USER, Message, ToolCall

SummarizeFn = Callable[[str, Sequence[Message]], str]
AsyncSummarizeFn = Callable[[str, Sequence[Message]], Awaitable[str]]
TokenCounter = Callable[[str], int]

SCHEMA_VERSION = 2

# rollmem does not bound the summary: neither does this module.
_UNBOUNDED = 1 << 40


def _check_version(data: Mapping[str, Any]) -> None:
    version = data.get("version")
    if version not in (1, 2):
        raise ValueError(f"unsupported serialization version: {version!r}")


def _message_dict(
    role: str,
    content: str,
    id: Optional[str],
    tool_calls: Sequence[ToolCall],
    tool_call_id: Optional[str],
    metadata: Optional[Mapping[str, Any]],
) -> Dict[str, Any]:
    """``Message(...).to_dict()``, without making the dataclass."""
    data: Dict[str, Any] = {"role": role, "content": content}
    if id is not None:
        data["id"] = id
    if tool_calls:
        data["tool_calls"] = [tc.to_dict() for tc in tool_calls]
    if tool_call_id is not None:
        data["tool_call_id"] = tool_call_id
    if metadata:
        data["metadata"] = dict(metadata)
    return data


def _summarizer(
    summarize_fn: Optional[Callable[..., Any]], async_twin: Optional[str] = None
) -> Optional[Callable[[Any], Any]]:
    """rollmem's ``summarize_fn(summary, messages)`` as a chatfold summarizer.

    For a sync memory (``async_twin`` names its async class), an object whose
    call returns an awaitable is refused as rollmem refuses it: a
    ``TypeError`` that names the async class, the awaitable closed unawaited
    (no "never awaited" warning), the memory unchanged.
    """
    if summarize_fn is None:
        return None

    def summarize(request: Any) -> Any:
        messages = [Message.from_dict(m) for m in request._state_messages()]
        summary = summarize_fn(request.previous_summary or "", messages)
        if async_twin is not None and inspect.isawaitable(summary):
            close = getattr(summary, "close", None)
            if close is not None:
                close()
            raise TypeError(f"summarize_fn returned an awaitable; use {async_twin} for async summarizers")
        return summary

    return summarize


class _MemoryBase:
    """The reads and the state every rollmem memory shares."""

    _m: Any

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        raise NotImplementedError

    @property
    def summary(self) -> str:
        """The running summary (``""``: none yet)."""
        return self._m.summary

    @summary.setter
    def summary(self, value: str) -> None:
        state = self._m.to_dict()
        state["summary"] = value
        self._m = self._build(state)

    @property
    def buffer(self) -> List[Message]:
        """The messages kept verbatim (a copy; assign a list to replace it)."""
        return [Message.from_dict(m) for m in self._m.to_dict()["buffer"]]

    @buffer.setter
    def buffer(self, value: Sequence[Message]) -> None:
        state = self._m.to_dict()
        state["buffer"] = [m.to_dict() for m in value]
        self._m = self._build(state)

    def get_context(self) -> str:
        """Summary (if any) followed by the verbatim buffer, as one string."""
        return "\n".join(str(m) for m in self.get_messages())

    def get_messages(self) -> List[Message]:
        """Buffer messages, with the running summary prepended as a system turn."""
        messages: List[Message] = []
        summary = self.summary
        if summary:
            messages.append(Message(role=SYSTEM, content=summary))
        messages.extend(self.buffer)
        return messages

    def clear(self) -> None:
        """Drop the summary and the buffer, discarding any in-flight fold."""
        self._m.clear()

    def to_dict(self) -> Dict[str, Any]:
        """Serialize the memory state to a plain ``dict`` (rollmem's format)."""
        state = self._m.to_dict()
        state["buffer"] = [Message.from_dict(m).to_dict() for m in state["buffer"]]
        return state

    def _load(self, data: Mapping[str, Any]) -> None:
        _check_version(data)
        state = {
            "version": data["version"],
            "summary": data.get("summary", ""),
            "buffer": [Message.from_dict(m).to_dict() for m in data.get("buffer", [])],
        }
        self._m = self._build(state)


class _SyncAdds(_MemoryBase):
    def add_message(
        self,
        role: str,
        content: str,
        *,
        id: Optional[str] = None,
        tool_calls: Sequence[ToolCall] = (),
        tool_call_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """Append a turn, then evict or fold as the strategy does."""
        self._m.add_message(_message_dict(role, content, id, tool_calls, tool_call_id, metadata))

    def add_user_message(self, content: str) -> None:
        """Append a ``user`` turn."""
        self.add_message(USER, content)

    def add_assistant_message(self, content: str) -> None:
        """Append an ``assistant`` turn."""
        self.add_message(ASSISTANT, content)

    def add_system_message(self, content: str) -> None:
        """Append a ``system`` turn."""
        self.add_message(SYSTEM, content)

    def add_tool_message(self, content: str, *, tool_call_id: Optional[str] = None) -> None:
        """Append a ``tool`` turn."""
        self.add_message(TOOL, content, tool_call_id=tool_call_id)


class _AsyncAdds(_MemoryBase):
    _summarize: Optional[Callable[[Any], Any]]

    async def add_message(
        self,
        role: str,
        content: str,
        *,
        id: Optional[str] = None,
        tool_calls: Sequence[ToolCall] = (),
        tool_call_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """Append a turn, then fold as the strategy does (the summarizer awaited)."""
        step = self._m._begin_add(_message_dict(role, content, id, tool_calls, tool_call_id, metadata))
        await drive(step, self._summarize or _never)

    async def add_user_message(self, content: str) -> None:
        """Append a ``user`` turn."""
        await self.add_message(USER, content)

    async def add_assistant_message(self, content: str) -> None:
        """Append an ``assistant`` turn."""
        await self.add_message(ASSISTANT, content)

    async def add_system_message(self, content: str) -> None:
        """Append a ``system`` turn."""
        await self.add_message(SYSTEM, content)

    async def add_tool_message(self, content: str, *, tool_call_id: Optional[str] = None) -> None:
        """Append a ``tool`` turn."""
        await self.add_message(TOOL, content, tool_call_id=tool_call_id)


def _never(request: Any) -> str:
    raise AssertionError("a memory without a summarizer was asked for a summary")


def _counter(token_counter: Optional[TokenCounter]) -> Any:
    return "words" if token_counter is None else token_counter


class RollingMemory(_SyncAdds):
    """Keeps recent turns verbatim and folds older turns into a running summary.

    As rollmem's: ``max_tokens`` bounds the buffer (counted with
    ``token_counter`` over each message's ``token_text()``, words by
    default); the oldest whole units are folded with one ``summarize_fn``
    call, and removed only once it succeeded.
    """

    def __init__(
        self,
        max_tokens: int = 2000,
        summarize_fn: Optional[SummarizeFn] = None,
        token_counter: Optional[TokenCounter] = None,
        *,
        strict: bool = False,
    ) -> None:
        if inspect.iscoroutinefunction(summarize_fn):
            raise TypeError(
                "summarize_fn is a coroutine function; use AsyncRollingMemory for async summarizers"
            )
        if max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        self.max_tokens = max_tokens
        self._summarize_fn = summarize_fn
        self._token_counter = token_counter
        self._strict = strict
        self._m = self._build(None)

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        return _chatfold.SyncMemory(
            "rolling",
            max_tokens=self.max_tokens,
            # rollmem's: a full buffer folds just under max_tokens.
            low_water=self.max_tokens,
            summarize=_summarizer(self._summarize_fn, "AsyncRollingMemory"),
            tokenizer=_counter(self._token_counter),
            counting="token_text",
            max_summary_tokens=_UNBOUNDED,
            ledger=False,
            state=state,
            allow_empty_summary=not self._strict,
        )

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        max_tokens: int = 2000,
        summarize_fn: Optional[SummarizeFn] = None,
        token_counter: Optional[TokenCounter] = None,
        strict: bool = False,
    ) -> RollingMemory:
        """Reconstruct a memory from its ``dict`` representation (verbatim: no
        fold, no drop until the next add)."""
        memory = cls(max_tokens=max_tokens, summarize_fn=summarize_fn, token_counter=token_counter, strict=strict)
        memory._load(data)
        return memory


class AsyncRollingMemory(_AsyncAdds):
    """Asyncio variant of :class:`RollingMemory`; ``summarize_fn`` may be a
    coroutine function. Safe for concurrent tasks on one loop: one fold in
    flight, adds meanwhile never lost, ``clear()`` wins over a fold in flight."""

    def __init__(
        self,
        max_tokens: int = 2000,
        summarize_fn: Optional[Union[SummarizeFn, AsyncSummarizeFn]] = None,
        token_counter: Optional[TokenCounter] = None,
        *,
        strict: bool = False,
    ) -> None:
        if max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        self.max_tokens = max_tokens
        self._summarize_fn = summarize_fn
        self._summarize = _summarizer(summarize_fn)
        self._token_counter = token_counter
        self._strict = strict
        self._m = self._build(None)

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        return _chatfold.AsyncMemory(
            "rolling",
            max_tokens=self.max_tokens,
            # rollmem's: a full buffer folds just under max_tokens.
            low_water=self.max_tokens,
            summarizes=self._summarize_fn is not None,
            tokenizer=_counter(self._token_counter),
            counting="token_text",
            max_summary_tokens=_UNBOUNDED,
            ledger=False,
            state=state,
            allow_empty_summary=not self._strict,
        )

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        max_tokens: int = 2000,
        summarize_fn: Optional[Union[SummarizeFn, AsyncSummarizeFn]] = None,
        token_counter: Optional[TokenCounter] = None,
        strict: bool = False,
    ) -> AsyncRollingMemory:
        """Reconstruct a memory from its ``dict`` representation."""
        memory = cls(max_tokens=max_tokens, summarize_fn=summarize_fn, token_counter=token_counter, strict=strict)
        memory._load(data)
        return memory


class BufferMemory(_SyncAdds):
    """Keeps the whole conversation verbatim: no summary, no eviction."""

    def __init__(self) -> None:
        self._m = self._build(None)

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        return _chatfold.SyncMemory("buffer", state=state)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BufferMemory:
        """Reconstruct a buffer memory from its ``dict`` representation."""
        memory = cls()
        memory._load(data)
        return memory


class WindowMemory(_SyncAdds):
    """Keeps only the most recent ``max_messages`` messages (whole units)."""

    def __init__(self, max_messages: int) -> None:
        if max_messages <= 0:
            raise ValueError("max_messages must be positive")
        self.max_messages = max_messages
        self._m = self._build(None)

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        return _chatfold.SyncMemory("window", max_messages=self.max_messages, state=state)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, max_messages: int) -> WindowMemory:
        """Reconstruct a window memory (verbatim; trimmed on the next add)."""
        memory = cls(max_messages=max_messages)
        memory._load(data)
        return memory


class SummaryMemory(_SyncAdds):
    """Keeps a single running summary: every turn folded on arrival."""

    def __init__(self, summarize_fn: SummarizeFn, *, strict: bool = False) -> None:
        if summarize_fn is None:
            raise ValueError("summarize_fn is required")
        if inspect.iscoroutinefunction(summarize_fn):
            raise TypeError(
                "summarize_fn is a coroutine function; use AsyncSummaryMemory for async summarizers"
            )
        self._summarize_fn = summarize_fn
        self._strict = strict
        self._m = self._build(None)

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        return _chatfold.SyncMemory(
            "summary",
            summarize=_summarizer(self._summarize_fn, "AsyncSummaryMemory"),
            max_summary_tokens=_UNBOUNDED,
            ledger=False,
            state=state,
            allow_empty_summary=not self._strict,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, summarize_fn: SummarizeFn, strict: bool = False) -> SummaryMemory:
        """Reconstruct a summary memory (no fold until the next add)."""
        memory = cls(summarize_fn=summarize_fn, strict=strict)
        memory._load(data)
        return memory


class AsyncSummaryMemory(_AsyncAdds):
    """Asyncio variant of :class:`SummaryMemory`."""

    def __init__(self, summarize_fn: Union[SummarizeFn, AsyncSummarizeFn], *, strict: bool = False) -> None:
        if summarize_fn is None:
            raise ValueError("summarize_fn is required")
        self._summarize_fn = summarize_fn
        self._summarize = _summarizer(summarize_fn)
        self._strict = strict
        self._m = self._build(None)

    def _build(self, state: Optional[Mapping[str, Any]]) -> Any:
        return _chatfold.AsyncMemory(
            "summary",
            max_summary_tokens=_UNBOUNDED,
            ledger=False,
            state=state,
            allow_empty_summary=not self._strict,
        )

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        summarize_fn: Union[SummarizeFn, AsyncSummarizeFn],
        strict: bool = False,
    ) -> AsyncSummaryMemory:
        """Reconstruct a summary memory (no fold until the next add)."""
        memory = cls(summarize_fn=summarize_fn, strict=strict)
        memory._load(data)
        return memory
