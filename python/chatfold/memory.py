"""The memories: per-conversation state over the compactor's rules.

Every memory keeps a running ``summary`` and a ``buffer`` of message dicts,
reads back with :meth:`messages` / :meth:`context`, and saves its state with
:meth:`to_dict` (the Rust crate's JSON, which Python rollmem reads) and
:meth:`from_dict`. The async memories await their summarizer in Python,
between the Rust fold's begin and complete steps.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import _chatfold
from ._drive import _BLOCKING, drive

Message = Dict[str, Any]
State = Dict[str, Any]

__all__ = [
    "RollingMemory",
    "AsyncRollingMemory",
    "BufferMemory",
    "WindowMemory",
    "SummaryMemory",
    "AsyncSummaryMemory",
    "TieredMemory",
]


class _Reads:
    """What every memory reads back."""

    _m: Any

    def messages(self) -> List[Message]:
        """The summary (as a system turn, with chatfold's prefix), then the buffer."""
        return self._m.messages()

    def context(self) -> str:
        """:meth:`messages` as one string of ``role: content`` lines."""
        return self._m.context()

    @property
    def summary(self) -> str:
        """The running summary (``""``: none yet)."""
        return self._m.summary

    @property
    def buffer(self) -> List[Message]:
        """The messages kept verbatim, oldest first (a copy)."""
        return self._m.buffer

    def to_dict(self) -> State:
        """The state: ``{"version": 2, "summary": ..., "buffer": [...]}``."""
        return self._m.to_dict()

    def clear(self) -> None:
        """Forgets the summary and the buffer."""
        self._m.clear()


class _Adds(_Reads):
    """The sync add helpers."""

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Adds a message dict. If a fold's summarizer raises, the exception
        propagates as itself; the message stays in the buffer and the next
        add folds again."""
        self._m.add_message(message)

    def add_user(self, content: str) -> None:
        """Adds a ``user`` message."""
        self._m.add_message({"role": "user", "content": content})

    def add_assistant(self, content: str) -> None:
        """Adds an ``assistant`` message."""
        self._m.add_message({"role": "assistant", "content": content})

    def add_system(self, content: str) -> None:
        """Adds a ``system`` message (an ordinary turn in the buffer)."""
        self._m.add_message({"role": "system", "content": content})

    def add_tool(self, content: str, call_id: str) -> None:
        """Adds a ``tool`` result for the call ``call_id``."""
        self._m.add_message({"role": "tool", "content": content, "tool_call_id": call_id})


class RollingMemory(_Adds):
    """Recent turns verbatim; older ones folded into a running summary once
    the buffer passes ``max_tokens`` (with ``low_water``: down to it).

    ``summarize`` is a callable ``f(request) -> str`` or ``"extractive"``;
    ``None`` drops what leaves the buffer. The summary is cut to
    ``max_summary_tokens`` (default ``max_tokens``). ``pin`` names messages
    every fold leaves at the buffer's front, verbatim (``"first-user"``: the
    agent's task).
    """

    def __init__(
        self,
        max_tokens: int = 2000,
        summarize: Optional[Any] = None,
        *,
        tokenizer: Optional[Any] = None,
        low_water: Optional[int] = None,
        pin: Optional[str] = None,
        max_summary_tokens: Optional[int] = None,
        ledger: bool = True,
        state: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self._m = _chatfold.SyncMemory(
            "rolling",
            max_tokens=max_tokens,
            summarize=summarize,
            tokenizer=tokenizer,
            low_water=low_water,
            pin=pin,
            max_summary_tokens=max_summary_tokens,
            ledger=ledger,
            state=state,
        )

    @classmethod
    def from_dict(cls, state: Mapping[str, Any], *args: Any, **kwargs: Any) -> "RollingMemory":
        """A memory holding ``state`` as it is (nothing folded or dropped until
        the next add); the other arguments are the constructor's."""
        return cls(*args, state=state, **kwargs)

    @property
    def buffer_tokens(self) -> int:
        """Tokens in the buffer now."""
        return self._m.buffer_tokens


class BufferMemory(_Adds):
    """Keeps everything, verbatim."""

    def __init__(self, *, state: Optional[Mapping[str, Any]] = None) -> None:
        self._m = _chatfold.SyncMemory("buffer", state=state)

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> "BufferMemory":
        """A memory holding ``state``."""
        return cls(state=state)


class WindowMemory(_Adds):
    """Keeps the last ``max_messages`` messages: whole tool-call units, the
    buffer opening on a user turn when it can."""

    def __init__(self, max_messages: int = 20, *, state: Optional[Mapping[str, Any]] = None) -> None:
        self._m = _chatfold.SyncMemory("window", max_messages=max_messages, state=state)

    @classmethod
    def from_dict(cls, state: Mapping[str, Any], max_messages: int = 20) -> "WindowMemory":
        """A memory holding ``state`` (trimmed on the next add)."""
        return cls(max_messages, state=state)


class SummaryMemory(_Adds):
    """Keeps only a running summary: every turn is folded on arrival."""

    def __init__(
        self,
        summarize: Any,
        *,
        max_summary_tokens: Optional[int] = None,
        ledger: bool = True,
        state: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self._m = _chatfold.SyncMemory(
            "summary", summarize=summarize, max_summary_tokens=max_summary_tokens, ledger=ledger, state=state
        )

    @classmethod
    def from_dict(cls, state: Mapping[str, Any], summarize: Any, **kwargs: Any) -> "SummaryMemory":
        """A memory holding ``state`` (its buffer folded on the next add)."""
        return cls(summarize, state=state, **kwargs)


class _AsyncAdds(_Reads):
    """The async add helpers: the summarizer is awaited in Python."""

    _summarize: Optional[Callable[[Any], Any]]

    async def add_message(self, message: Mapping[str, Any]) -> None:
        """Adds a message dict, folding as the strategy does. Safe for
        concurrent tasks: one fold in flight; adds meanwhile are kept and
        folded next; a failure or a cancellation changes nothing."""
        step = self._m._begin_add(message)
        await drive(step, self._summarize or _never)

    async def add_user(self, content: str) -> None:
        """Adds a ``user`` message."""
        await self.add_message({"role": "user", "content": content})

    async def add_assistant(self, content: str) -> None:
        """Adds an ``assistant`` message."""
        await self.add_message({"role": "assistant", "content": content})

    async def add_system(self, content: str) -> None:
        """Adds a ``system`` message."""
        await self.add_message({"role": "system", "content": content})

    async def add_tool(self, content: str, call_id: str) -> None:
        """Adds a ``tool`` result for the call ``call_id``."""
        await self.add_message({"role": "tool", "content": content, "tool_call_id": call_id})


def _never(request: Any) -> str:
    raise AssertionError("a memory without a summarizer was asked for a summary")


class AsyncRollingMemory(_AsyncAdds):
    """:class:`RollingMemory` with an async summarizer (a coroutine function
    ``async f(request) -> str``, or a plain function)."""

    def __init__(
        self,
        max_tokens: int = 2000,
        summarize: Optional[Callable[[Any], Any]] = None,
        *,
        tokenizer: Optional[Any] = None,
        low_water: Optional[int] = None,
        pin: Optional[str] = None,
        max_summary_tokens: Optional[int] = None,
        ledger: bool = True,
        state: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self._summarize = summarize
        self._m = _chatfold.AsyncMemory(
            "rolling",
            max_tokens=max_tokens,
            summarizes=summarize is not None,
            tokenizer=tokenizer,
            low_water=low_water,
            pin=pin,
            max_summary_tokens=max_summary_tokens,
            ledger=ledger,
            state=state,
        )

    @classmethod
    def from_dict(cls, state: Mapping[str, Any], *args: Any, **kwargs: Any) -> "AsyncRollingMemory":
        """A memory holding ``state`` as it is."""
        return cls(*args, state=state, **kwargs)


class AsyncSummaryMemory(_AsyncAdds):
    """:class:`SummaryMemory` with an async summarizer."""

    def __init__(
        self,
        summarize: Callable[[Any], Any],
        *,
        max_summary_tokens: Optional[int] = None,
        ledger: bool = True,
        state: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self._summarize = summarize
        self._m = _chatfold.AsyncMemory(
            "summary", max_summary_tokens=max_summary_tokens, ledger=ledger, state=state
        )

    @classmethod
    def from_dict(cls, state: Mapping[str, Any], summarize: Callable[[Any], Any], **kwargs: Any) -> "AsyncSummaryMemory":
        """A memory holding ``state`` (its buffer folded on the next add)."""
        return cls(summarize, state=state, **kwargs)


class TieredMemory(_Reads):
    """sawtooth's model: pinned system messages, a running summary with an
    exact-identifier ledger, recent turns verbatim.

    :meth:`add_message` only appends, never awaits; past ``soft_limit`` a
    worker (an asyncio task the memory starts with :meth:`start` or
    ``async with``, and stops with :meth:`stop`) folds chunks in the
    background with ``summarize``, down to ``low_water`` (default: half
    ``soft_limit``, so the prompt's prefix stays between folds; sawtooth
    folds only back under ``soft_limit``). :meth:`messages` never passes
    ``hard_limit`` tokens, whatever the summarizer does.
    """

    def __init__(
        self,
        soft_limit: int,
        hard_limit: int,
        summarize: Callable[[Any], Any],
        *,
        system: Optional[List[Mapping[str, Any]]] = None,
        tokenizer: Optional[Any] = None,
        low_water: Optional[int] = None,
        pin: Optional[str] = None,
        chunk_size: Optional[int] = None,
        chunk_tokens: Optional[int] = None,
        fallback_truncate: bool = False,
        max_failures: int = 3,
        max_summary_tokens: Optional[int] = None,
        ledger: bool = True,
        state: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self._summarize = summarize
        self._m = _chatfold.Tiered(
            soft_limit,
            hard_limit,
            system=system,
            tokenizer=tokenizer,
            low_water=low_water,
            pin=pin,
            chunk_size=chunk_size,
            chunk_tokens=chunk_tokens,
            fallback_truncate=fallback_truncate,
            max_failures=max_failures,
            max_summary_tokens=max_summary_tokens,
            ledger=ledger,
            state=state,
        )
        self._step = self._m._take_worker()
        self._wake: Optional[asyncio.Event] = None
        self._task: Optional["asyncio.Task[None]"] = None
        # The worker's folds reported to a compat layer (sawtooth's events):
        # an object with ``fold_started(request)`` and ``fold_finished(request,
        # ok, answer_or_error)``, the latter once the fold has landed.
        self._observer: Optional[Any] = None

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Appends a message dict; wakes the worker when a fold is due."""
        self._m.add_message(message)
        if self._wake is not None and self._step.woken():
            self._wake.set()

    def add_user(self, content: str) -> None:
        """Appends a ``user`` message."""
        self.add_message({"role": "user", "content": content})

    def add_assistant(self, content: str) -> None:
        """Appends an ``assistant`` message."""
        self.add_message({"role": "assistant", "content": content})

    def add_tool(self, content: str, call_id: str) -> None:
        """Appends a ``tool`` result for the call ``call_id``."""
        self.add_message({"role": "tool", "content": content, "tool_call_id": call_id})

    def stats(self) -> Dict[str, Any]:
        """Tokens per tier, folds done / failed / pending, dropped messages, the last error."""
        return self._m.stats()

    def start(self) -> None:
        """Starts the worker on the running event loop (once)."""
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def stop(self) -> None:
        """Stops the worker; a fold in flight is abandoned, nothing lost."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def fold_now(self) -> None:
        """Folds what is due now, awaiting the summarizer here (after a fold
        in flight, if any); a failure is raised and recorded in :meth:`stats`."""
        await drive(self._m._begin_fold_now(), self._summarize)

    async def __aenter__(self) -> "TieredMemory":
        self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def _work(self) -> None:
        assert self._wake is not None
        step = self._step
        landed: Optional[tuple] = None
        while True:
            request = step.poll()
            if landed is not None:  # the poll above applied the fold
                self._tell("fold_finished", *landed)
                landed = None
            if request is not None:
                self._tell("fold_started", request)
                try:
                    if isinstance(self._summarize, _BLOCKING):
                        loop = asyncio.get_running_loop()
                        answer = await loop.run_in_executor(None, self._summarize, request)
                    else:
                        answer = self._summarize(request)
                    if asyncio.iscoroutine(answer) or hasattr(answer, "__await__"):
                        answer = await answer
                except Exception as error:
                    step.fail(error)
                    landed = (request, False, error)
                except BaseException:
                    step.cancel()
                    raise
                else:
                    step.answer(answer)
                    landed = (request, True, answer)
                continue
            if step.done():
                return
            if not step.woken():
                await self._wake.wait()
                self._wake.clear()

    def _tell(self, name: str, *args: Any) -> None:
        observer = self._observer
        if observer is not None:
            try:
                getattr(observer, name)(*args)
            except Exception:  # an observer's bug never stops the worker
                logging.getLogger("chatfold").exception("fold observer %s failed", name)
