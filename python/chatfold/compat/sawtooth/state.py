"""sawtooth-memory's state tree (L0 to L3) as read-only snapshots of
chatfold's tiered memory.

``manager.state`` returns a :class:`MemoryState` built from chatfold's state
when it is read: L0 the system prompt, L1 the working buffer, L1.5 the
exact-identifier ledger, L2 the running summary. It is frozen: mutating it
(``state.l1_5_entities.upsert(...)``, assigning a field) raises instead of
being silently ignored. It serialises with pydantic's method names
(``model_dump``, ``model_dump_json``, ``model_validate``,
``model_validate_json``), so storage adapters written for sawtooth keep
working; ``chatfold`` carries chatfold's own state (the Rust crate's JSON),
which restoring reads first. A state saved by sawtooth-memory itself loads
too: its L1 messages and its narrative (with its ledger's ``key: value``
lines appended) become chatfold's buffer and summary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple
from uuid import uuid4

from .exceptions import NotSupportedError

__all__ = [
    "MessageRole",
    "Message",
    "SystemPrompt",
    "WorkingMemory",
    "EntityLedger",
    "ArchivalMemory",
    "SemanticVectorMemory",
    "DTEState",
    "MemoryState",
]

MessageRole = Literal["user", "assistant", "system", "tool"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _time(value: Any) -> Optional[datetime]:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


@dataclass(frozen=True)
class Message:
    """A turn in working memory (L1)."""

    role: str
    content: str
    id: str = field(default_factory=lambda: str(uuid4()))
    timestamp: datetime = field(default_factory=_now)
    token_count: int = 0

    def to_openai_dict(self) -> Dict[str, str]:
        """``{"role": ..., "content": ...}``."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class SystemPrompt:
    """L0: the system prompt, never folded."""

    content: str
    token_count: int = 0


@dataclass(frozen=True)
class WorkingMemory:
    """L1: the recent turns kept verbatim (all of them, also those the
    prompt leaves out while a fold is pending)."""

    messages: Tuple[Message, ...] = ()
    token_count: int = 0

    def append(self, message: Message) -> None:
        """Not supported on a snapshot: add with ``add_message``."""
        raise NotSupportedError("mutating a MemoryState snapshot", "use add_message")

    def slice_oldest(self, n: int) -> List[Message]:
        """Not supported on a snapshot: chatfold's core decides what folds."""
        raise NotSupportedError("mutating a MemoryState snapshot", "chatfold's core decides what folds")


@dataclass(frozen=True)
class EntityLedger:
    """L1.5: the exact identifiers chatfold's ledger keeps. An entry
    ``key: value`` maps ``key`` to ``[value]``; a bare identifier maps to itself."""

    entities: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    max_history_per_key: int = 10

    def get_latest(self, key: str) -> Optional[str]:
        """The latest value of ``key`` (``None``: not in the ledger)."""
        values = self.entities.get(key)
        return values[-1] if values else None

    def get_history(self, key: str) -> List[str]:
        """Every value of ``key``, oldest first."""
        return list(self.entities.get(key, ()))

    def to_json_str(self) -> str:
        """The ledger as sawtooth renders it: each key's latest value, and
        ``<key>__history`` for earlier ones."""
        flat: Dict[str, str] = {}
        for key, values in self.entities.items():
            if values:
                flat[key] = values[-1]
                if len(values) > 1:
                    flat[f"{key}__history"] = " → ".join(values[:-1])
        return json.dumps(flat, indent=2)

    def upsert(self, new_entities: Mapping[str, str]) -> None:
        """Not supported: chatfold's core keeps the ledger (from what it folds)."""
        raise NotSupportedError("editing the entity ledger", "chatfold's core keeps the ledger from what it folds")

    def set_event_callback(self, callback: Any) -> None:
        """Not supported: subscribe to ``EntityAnchoredEvent`` on the event bus."""
        raise NotSupportedError("ledger callbacks", "subscribe to EntityAnchoredEvent on the event bus")


@dataclass(frozen=True)
class ArchivalMemory:
    """L2: the running summary's narrative (the ledger is L1.5)."""

    narrative: str = ""
    token_count: int = 0

    def append_narrative(self, new_text: str) -> None:
        """Not supported: chatfold's core writes the summary."""
        raise NotSupportedError("editing the archive", "chatfold's core writes the summary")


@dataclass(frozen=True)
class SemanticVectorMemory:
    """L3's counts (always empty: chatfold has no L3 storage)."""

    chunk_count: int = 0
    last_indexed_at: Optional[datetime] = None


@dataclass(frozen=True)
class DTEState:
    """sawtooth's DTE accounting, as far as chatfold has a counterpart."""

    narrative_debt_tokens: int = 0
    folds_since_narrative: int = 0
    main_prompt_tokens: int = 0
    background_llm_input_tokens: int = 0
    observation_tokens_saved: int = 0
    fold_cycles: int = 0
    consolidation_cycles: int = 0
    novelty_skips: int = 0
    consolidation_queued: bool = False

    def model_dump(self) -> Dict[str, Any]:
        """The fields as a dict."""
        return asdict(self)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class MemoryState:
    """The whole state: L0 to L3, the DTE counts, and ``chatfold``
    (chatfold's own state, which restoring reads first)."""

    l0_system: SystemPrompt
    l1_working: WorkingMemory = field(default_factory=WorkingMemory)
    l1_5_entities: EntityLedger = field(default_factory=EntityLedger)
    l2_archival: ArchivalMemory = field(default_factory=ArchivalMemory)
    l3_semantic: SemanticVectorMemory = field(default_factory=SemanticVectorMemory)
    dte: DTEState = field(default_factory=DTEState)
    chatfold: Optional[Dict[str, Any]] = None

    def model_dump(self, mode: str = "python", **_: Any) -> Dict[str, Any]:
        """The state as a dict (``mode="json"``: times as ISO strings)."""
        data = asdict(self)
        data["l1_5_entities"] = {
            "entities": {k: list(v) for k, v in self.l1_5_entities.entities.items()},
        }
        return _jsonable(data) if mode == "json" else data

    def model_dump_json(self, **_: Any) -> str:
        """The state as JSON."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)

    @classmethod
    def model_validate(cls, data: Any) -> "MemoryState":
        """A state from :meth:`model_dump`'s dict, or from sawtooth-memory's
        own ``MemoryState`` dump. Raises ``ValueError`` when it is neither."""
        if isinstance(data, MemoryState):
            return data
        if hasattr(data, "model_dump") and not isinstance(data, Mapping):
            data = data.model_dump(mode="json")
        if not isinstance(data, Mapping) or not isinstance(data.get("l0_system"), Mapping):
            raise ValueError("a MemoryState needs a mapping with an 'l0_system' object")
        try:
            l0 = data["l0_system"]
            l1 = data.get("l1_working") or {}
            ledger = (data.get("l1_5_entities") or {}).get("entities") or {}
            l2 = data.get("l2_archival") or {}
            l3 = data.get("l3_semantic") or {}
            messages = tuple(
                Message(
                    role=str(m["role"]),
                    content=str(m["content"]),
                    id=str(m.get("id") or uuid4()),
                    timestamp=_time(m.get("timestamp")) or _now(),
                    token_count=int(m.get("token_count", 0)),
                )
                for m in l1.get("messages", [])
            )
            return cls(
                l0_system=SystemPrompt(content=str(l0["content"]), token_count=int(l0.get("token_count", 0))),
                l1_working=WorkingMemory(messages=messages, token_count=int(l1.get("token_count", 0))),
                l1_5_entities=EntityLedger(
                    entities={str(k): tuple(str(x) for x in (v if isinstance(v, list) else [v])) for k, v in ledger.items()}
                ),
                l2_archival=ArchivalMemory(narrative=str(l2.get("narrative", "")), token_count=int(l2.get("token_count", 0))),
                l3_semantic=SemanticVectorMemory(
                    chunk_count=int(l3.get("chunk_count", 0)), last_indexed_at=_time(l3.get("last_indexed_at"))
                ),
                dte=DTEState(**{k: v for k, v in (data.get("dte") or {}).items() if k in DTEState.__dataclass_fields__}),
                chatfold=data.get("chatfold"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a MemoryState: {error}") from None

    @classmethod
    def model_validate_json(cls, text: Any) -> "MemoryState":
        """A state from :meth:`model_dump_json`'s JSON (or sawtooth-memory's)."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ValueError(f"not a MemoryState: {error}") from None
        return cls.model_validate(data)

    def _chatfold_state(self) -> Dict[str, Any]:
        """chatfold's state to restore: its own when saved here, else one
        made from sawtooth's tiers (L1 as the buffer, L2 and L1.5 as the summary)."""
        if isinstance(self.chatfold, Mapping):
            return dict(self.chatfold)
        summary = self.l2_archival.narrative.strip()
        facts = [f"{k}: {v[-1]}" for k, v in self.l1_5_entities.entities.items() if v]
        if facts:
            summary = "\n".join([summary, *facts]).strip()
        buffer = [{"role": m.role, "content": m.content, "id": m.id} for m in self.l1_working.messages]
        return {"version": 2, "summary": summary, "buffer": buffer}
