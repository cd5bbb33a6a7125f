"""What the compat.sawtooth tests share: a turn long enough to count, the
async manager's config, and a sync manager's compressor stood in for."""

from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional
from unittest.mock import MagicMock, patch

import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth import sync_manager

TURN = "turn {} with enough words to count for something here"


def config(**overrides: Any) -> "compat.ContextManagerConfig":
    """The async manager's config: soft limit 20, hard 1 000, chunks of
    two, the summarizer's folds (``overrides`` replace any of these)."""
    base = dict(soft_limit_tokens=20, hard_limit_tokens=1000, chunk_size=2, compression_mode="always_llm")
    base.update(overrides)
    return compat.ContextManagerConfig(**base)


def compressor(narrative: str = "Talked.", entities: Optional[Mapping[str, str]] = None) -> MagicMock:
    """A compressor that answers ``narrative`` and ``entities``."""
    stand_in = MagicMock()
    stand_in.compress.return_value = {"narrative_summary": narrative, "extracted_entities": dict(entities or {})}
    return stand_in


@contextmanager
def sync_compressing(stand_in: MagicMock, **limits: Any) -> Iterator["compat.ContextManagerConfig"]:
    """The sync manager's config (soft limit 40, hard 2 000, chunks of
    two, ``limits`` replacing any), its compressor ``stand_in`` while the
    block runs."""
    base = dict(soft_limit_tokens=40, hard_limit_tokens=2000, chunk_size=2, compression_mode="always_llm")
    base.update(limits)
    with patch.object(sync_manager, "SyncOllamaCompressor", return_value=stand_in):
        yield compat.ContextManagerConfig.for_sync_script(**base)
