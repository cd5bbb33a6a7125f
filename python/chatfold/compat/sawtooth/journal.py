"""sawtooth-memory's compression journal: one JSON line per completed
compression cycle, in sawtooth's record format, rotated by size or count."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

__all__ = ["JournalEntry", "AsyncCompressionJournal"]

logger = logging.getLogger(__name__)


@dataclass
class JournalEntry:
    """One journal line (sawtooth's fields)."""

    cycle_id: str
    timestamp: str
    l1_tokens_evicted: int
    l1_5_entities_retained: Dict[str, Any]
    l2_summary_generated: str
    messages_compressed: Optional[int] = None
    total_duration_ms: Optional[int] = None
    final_l1_tokens: Optional[int] = None

    def to_json(self) -> str:
        """The entry as one compact JSON object."""
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)


class AsyncCompressionJournal:
    """An append-only JSONL journal; writes run off the event loop. Past
    ``max_size_mb`` or ``max_entries`` the file is moved to a ``.bak`` beside it."""

    def __init__(
        self,
        path: Union[str, Path],
        max_size_mb: int = 100,
        max_entries: int = 10000,
        flush_interval_seconds: float = 1.0,
    ) -> None:
        self.path = Path(path)
        self.max_size_mb = max_size_mb
        self.max_entries = max_entries
        self.flush_interval = flush_interval_seconds
        self._entries = 0
        self._lock: Optional[asyncio.Lock] = None
        self._running = False

    def _count(self) -> None:
        if self.path.exists():
            with open(self.path, "rb") as f:
                self._entries = sum(1 for _ in f)

    async def start(self) -> None:
        """Opens the journal (its folder is made when the first entry is written)."""
        if not self._running:
            self._running = True
            self._lock = asyncio.Lock()
            await asyncio.to_thread(self._count)

    async def stop(self) -> None:
        """Closes the journal (every entry written so far is on disk)."""
        if self._lock is not None:
            async with self._lock:
                pass
        self._running = False

    async def write(
        self,
        cycle_id: str,
        l1_tokens_evicted: int,
        l1_5_entities_retained: Dict[str, Any],
        l2_summary_generated: str,
        timestamp: Optional[datetime] = None,
        extra: Optional[Dict[str, Any]] = None,
    ) -> None:
        """Appends one entry (``extra``: ``messages_compressed``,
        ``total_duration_ms``, ``final_l1_tokens``)."""
        when = (timestamp or datetime.now(timezone.utc)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entry = JournalEntry(
            cycle_id=cycle_id,
            timestamp=when,
            l1_tokens_evicted=l1_tokens_evicted,
            l1_5_entities_retained=l1_5_entities_retained,
            l2_summary_generated=l2_summary_generated,
            **(extra or {}),
        )
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await asyncio.to_thread(self._append, entry.to_json() + "\n")

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        size = self.path.stat().st_size if self.path.exists() else 0
        if self._entries >= self.max_entries or size >= self.max_size_mb * 1024 * 1024:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S")
            self.path.rename(self.path.with_suffix(f".{stamp}.jsonl.bak"))
            self._entries = 0
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
        self._entries += 1

    async def read_recent(self, limit: int = 100) -> List[Dict[str, Any]]:
        """The last ``limit`` entries, most recent first (unreadable lines skipped)."""
        if not self.path.exists():
            return []
        text = await asyncio.to_thread(self.path.read_text, encoding="utf-8")
        entries = []
        for line in text.splitlines()[-limit:]:
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return list(reversed(entries))
