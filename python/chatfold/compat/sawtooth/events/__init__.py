"""sawtooth-memory's events: the bus, the handlers and the event types."""

from .bus import EventBus, get_event_bus, reset_event_bus
from .handlers import console_logger, make_journal_handler
from .types import (
    CompressionCycleCompleteEvent,
    CompressionCycleFailedEvent,
    CompressionCycleStartEvent,
    DTEFoldCreatedEvent,
    EntityAnchoredEvent,
    HardLimitReachedEvent,
    L1EvictionEvent,
    L2SummaryGeneratedEvent,
    L3VectorIndexedEvent,
    SawtoothEvent,
    SoftLimitReachedEvent,
)

__all__ = [
    "EventBus",
    "get_event_bus",
    "reset_event_bus",
    "make_journal_handler",
    "console_logger",
    "CompressionCycleCompleteEvent",
    "CompressionCycleFailedEvent",
    "CompressionCycleStartEvent",
    "DTEFoldCreatedEvent",
    "EntityAnchoredEvent",
    "HardLimitReachedEvent",
    "L1EvictionEvent",
    "L2SummaryGeneratedEvent",
    "L3VectorIndexedEvent",
    "SawtoothEvent",
    "SoftLimitReachedEvent",
]
