"""sawtooth-memory's built-in event handlers: the compression journal and a
console logger."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

from ..journal import AsyncCompressionJournal
from .types import CompressionCycleCompleteEvent

__all__ = ["make_journal_handler", "console_logger"]

logger = logging.getLogger(__name__)


def make_journal_handler(
    journal: AsyncCompressionJournal,
) -> Callable[[CompressionCycleCompleteEvent], Awaitable[None]]:
    """A handler writing each completed cycle to ``journal`` (one JSON line)."""

    async def journal_handler(event: CompressionCycleCompleteEvent) -> None:
        await journal.write(
            cycle_id=event.cycle_id or event.event_id,
            l1_tokens_evicted=event.l1_tokens_evicted,
            l1_5_entities_retained=event.l1_5_entities_retained,
            l2_summary_generated=event.l2_summary_generated,
            timestamp=event.timestamp,
            extra={
                "messages_compressed": event.messages_compressed,
                "total_duration_ms": event.total_duration_ms,
                "final_l1_tokens": event.final_l1_tokens,
            },
        )

    return journal_handler


async def console_logger(event: Any) -> None:
    """Logs every event at INFO (for debugging)."""
    logger.info("[EVENT] %s: %s", event.event_type, event)
