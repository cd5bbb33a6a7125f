"""sawtooth-memory's event types: the same dataclasses, names, fields and
``event_type`` strings. chatfold fires the ones for what it does (see the
package's docs): soft / hard limit reached, compression cycle started /
complete / failed, L1 eviction, L2 summary generated, DTE fold created and
entity anchored; never ``L3VectorIndexedEvent`` (no L3 storage)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional
from uuid import uuid4

__all__ = [
    "SawtoothEvent",
    "L1EvictionEvent",
    "EntityAnchoredEvent",
    "L2SummaryGeneratedEvent",
    "CompressionCycleCompleteEvent",
    "CompressionCycleFailedEvent",
    "SoftLimitReachedEvent",
    "HardLimitReachedEvent",
    "CompressionCycleStartEvent",
    "L3VectorIndexedEvent",
    "DTEFoldCreatedEvent",
]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class SawtoothEvent:
    """The base event: its type, id, time (UTC), session and cycle."""

    event_type: str = "base"
    event_id: str = field(default_factory=lambda: str(uuid4()))
    timestamp: datetime = field(default_factory=_utcnow)
    session_id: Optional[str] = None
    cycle_id: Optional[str] = None


@dataclass
class L1EvictionEvent(SawtoothEvent):
    """Messages left working memory (L1) into the summary."""

    event_type: str = "l1.eviction"
    tokens_evicted: int = 0
    messages_evicted: int = 0
    tokens_remaining_l1: int = 0
    evicted_message_ids: List[str] = field(default_factory=list)
    trigger: str = "soft_limit_exceeded"


@dataclass
class EntityAnchoredEvent(SawtoothEvent):
    """An exact identifier entered the ledger (L1.5)."""

    event_type: str = "l1_5.entity_anchored"
    entity_key: str = ""
    entity_value: Any = None
    operation: str = "insert"
    source_message_id: Optional[str] = None


@dataclass
class L2SummaryGeneratedEvent(SawtoothEvent):
    """A fold produced the archive's (L2) new summary."""

    event_type: str = "l2.summary_generated"
    summary_text: str = ""
    compressed_message_count: int = 0
    original_tokens: int = 0
    compressed_tokens: int = 0
    compression_ratio: float = 0.0
    provider: str = ""
    model: str = ""
    compression_duration_ms: int = 0
    fallback_used: bool = False


@dataclass
class CompressionCycleCompleteEvent(SawtoothEvent):
    """A compression cycle (a fold) landed."""

    event_type: str = "compression.cycle_complete"
    l1_tokens_evicted: int = 0
    l1_5_entities_retained: Dict[str, Any] = field(default_factory=dict)
    l2_summary_generated: str = ""
    messages_compressed: int = 0
    final_l1_tokens: int = 0
    total_duration_ms: int = 0


@dataclass
class CompressionCycleFailedEvent(SawtoothEvent):
    """A compression cycle failed (its messages stay in L1)."""

    event_type: str = "compression.cycle_failed"
    error_type: str = ""
    error_message: str = ""
    fallback_triggered: bool = False


@dataclass
class SoftLimitReachedEvent(SawtoothEvent):
    """Working memory crossed ``soft_limit_tokens``."""

    event_type: str = "monitor.soft_limit_reached"
    current_tokens: int = 0
    soft_limit: int = 0
    hard_limit: int = 0


@dataclass
class HardLimitReachedEvent(SawtoothEvent):
    """Working memory crossed ``hard_limit_tokens``."""

    event_type: str = "monitor.hard_limit_reached"
    current_tokens: int = 0
    soft_limit: int = 0
    hard_limit: int = 0


@dataclass
class CompressionCycleStartEvent(SawtoothEvent):
    """A compression cycle (a fold) started."""

    event_type: str = "compression.cycle_started"
    current_l1_tokens: int = 0
    chunk_size: int = 0


@dataclass
class L3VectorIndexedEvent(SawtoothEvent):
    """sawtooth's L3 indexing event (never fired by chatfold: no L3 storage)."""

    event_type: str = "l3.vector_indexed"
    chunks_indexed: int = 0
    total_chunks: int = 0
    source_chars: int = 0
    embedding_backend: str = ""
    embedding_model: str = ""


@dataclass
class DTEFoldCreatedEvent(SawtoothEvent):
    """A fold without a model (``compression_mode="dte"``) landed."""

    event_type: str = "dte.fold_created"
    messages_folded: int = 0
    tokens_evicted: int = 0
    entity_keys: List[str] = field(default_factory=list)
    l3_chunks_indexed: int = 0
    recoverable: bool = False
