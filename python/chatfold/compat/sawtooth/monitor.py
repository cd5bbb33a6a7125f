"""sawtooth-memory's ``TokenMonitor``: token counting and the soft and
hard limit checks, counted with chatfold's tokenizers (tiktoken's
encodings, in Rust; cl100k_base for a model tiktoken does not know, as in
sawtooth). The managers use one to decide when a compression cycle is
queued (``CompressionWorker.enqueue``); the folds themselves are chatfold's
core's."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from ... import _chatfold
from .events.bus import EventBus
from .events.types import HardLimitReachedEvent, SoftLimitReachedEvent
from .state import MemoryState, Message

__all__ = ["TokenMonitor"]

# What a message costs beyond its text (sawtooth's constant).
_MESSAGE_OVERHEAD = 4


class TokenMonitor:
    """Counts tokens with ``model``'s encoding and says when L1 crossed the
    soft or hard limit, or holds ``max_unsummarized_turns`` turns; a queued
    cycle holds a debounce lock until it completes or fails (or
    :meth:`release_compression_lock`). With ``event_bus``, the first
    crossing of each limit emits ``SoftLimitReachedEvent`` /
    ``HardLimitReachedEvent``."""

    def __init__(
        self,
        model: str = "gpt-4o",
        soft_limit: int = 3000,
        hard_limit: int = 6000,
        max_unsummarized_turns: Optional[int] = None,
        event_bus: Optional[EventBus] = None,
    ) -> None:
        from ._core import tokenizer_for

        self.soft_limit = soft_limit
        self.hard_limit = hard_limit
        self.max_unsummarized_turns = max_unsummarized_turns
        self.event_bus = event_bus
        self.tokenizer = tokenizer_for(model)
        self._soft_exceeded = False
        self._hard_exceeded = False
        self._is_compression_queued = False
        if event_bus is not None:
            event_bus.subscribe("compression.cycle_complete", self._on_compression_done)
            event_bus.subscribe("compression.cycle_failed", self._on_compression_done)

    def release_compression_lock(self) -> None:
        """Lets the next check queue a cycle again."""
        self._is_compression_queued = False

    async def _on_compression_done(self, event: Any) -> None:
        self.release_compression_lock()
        self._soft_exceeded = False

    def should_trigger_compression(self, state: MemoryState) -> bool:
        """Whether a cycle should be queued now: L1 past the soft limit or
        holding ``max_unsummarized_turns`` turns, and none queued already
        (the check then takes the lock)."""
        if self._is_compression_queued:
            return False
        needed = self.exceeds_soft_limit(state)
        if self.max_unsummarized_turns is not None and len(state.l1_working.messages) >= self.max_unsummarized_turns:
            needed = True
        if needed:
            self._is_compression_queued = True
        return needed

    def count_text(self, text: str) -> int:
        """Tokens of ``text``."""
        return _chatfold.count_text(text, self.tokenizer) if text else 0

    def count_message(self, message: Message) -> int:
        """Tokens of a message: its content and sawtooth's overhead of 4."""
        return self.count_text(message.content) + _MESSAGE_OVERHEAD

    def exceeds_soft_limit(self, state: MemoryState) -> bool:
        """Whether L1's ``token_count`` reached the soft limit."""
        exceeded = state.l1_working.token_count >= self.soft_limit
        if exceeded and not self._soft_exceeded:
            self._emit(SoftLimitReachedEvent, state.l1_working.token_count)
        self._soft_exceeded = exceeded
        return exceeded

    def exceeds_hard_limit(self, state: MemoryState) -> bool:
        """Whether L1's ``token_count`` reached the hard limit."""
        exceeded = state.l1_working.token_count >= self.hard_limit
        if exceeded and not self._hard_exceeded:
            self._emit(HardLimitReachedEvent, state.l1_working.token_count)
        self._hard_exceeded = exceeded
        return exceeded

    def recount_working_memory(self, state: MemoryState) -> None:
        """Recounts every L1 message and L1's total."""
        total = 0
        for message in state.l1_working.messages:
            message.token_count = self.count_message(message)
            total += message.token_count
        state.l1_working.token_count = total

    def _emit(self, kind: Any, tokens: int) -> None:
        if self.event_bus is None:
            return
        event = kind(current_tokens=tokens, soft_limit=self.soft_limit, hard_limit=self.hard_limit)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to deliver on (sawtooth needs one too)
        self.event_bus.emit_nowait(event)
