"""sawtooth-memory's ``compression_core``: the helpers that work on the
state's tiers (:func:`messages_to_text`, :func:`estimate_tokens`,
:func:`merge_compression_into_state`) are sawtooth's; the compression
cycle itself is not supported by chatfold (chatfold folds in its Rust
core, with its own ledger, not sawtooth's NER pipeline). Its names import,
so a switched program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from __future__ import annotations

from typing import Any, List, Mapping

from ._unsupported import unsupported_class, unsupported_function
from .state import MemoryState, Message

_FEATURE = "sawtooth's LLM compression pipeline (chatfold folds in its Rust core)"

__all__ = ["AsyncCompressor", "CompressionCycleInput", "CompressionCycleOutcome", "CompressionEngineConfig", "SyncCompressor", "estimate_tokens", "fallback_merge_into_state", "merge_compression_into_state", "messages_to_text", "run_compression_cycle_async", "run_compression_cycle_sync"]


def messages_to_text(messages: List[Message]) -> str:
    """The messages as ``ROLE: content`` paragraphs (what sawtooth's compressor reads)."""
    return "\n\n".join(f"{m.role.upper()}: {m.content}" for m in messages)


def estimate_tokens(text: str) -> int:
    """sawtooth's rough estimate: four characters a token."""
    return len(text) // 4


def merge_compression_into_state(state: MemoryState, result: Mapping[str, Any]) -> None:
    """Appends a compressor's ``narrative_summary`` to L2 and upserts its
    ``extracted_entities`` into L1.5 (sawtooth's merge)."""
    narrative = str(result.get("narrative_summary", "") or "").strip()
    entities = result.get("extracted_entities") or {}
    if narrative:
        state.l2_archival.append_narrative(narrative)
    if entities:
        state.l1_5_entities.upsert(dict(entities))


AsyncCompressor = unsupported_class(__name__, "AsyncCompressor", _FEATURE)
CompressionCycleInput = unsupported_class(__name__, "CompressionCycleInput", _FEATURE)
CompressionCycleOutcome = unsupported_class(__name__, "CompressionCycleOutcome", _FEATURE)
CompressionEngineConfig = unsupported_class(__name__, "CompressionEngineConfig", _FEATURE)
SyncCompressor = unsupported_class(__name__, "SyncCompressor", _FEATURE)
fallback_merge_into_state = unsupported_function(__name__, "fallback_merge_into_state", _FEATURE)
run_compression_cycle_async = unsupported_function(__name__, "run_compression_cycle_async", _FEATURE)
run_compression_cycle_sync = unsupported_function(__name__, "run_compression_cycle_sync", _FEATURE)
