"""sawtooth-memory's state tree (L0 to L3): the same pydantic v2 models,
field names and methods, over chatfold's tiered memory.

``manager.state`` returns one live :class:`MemoryState` per manager, as
sawtooth's does: L0 the system prompt, L1 the working buffer, L1.5 the
exact-identifier ledger, L2 the running summary's narrative. It follows
the memory (a turn added or a fold landed shows on the next read), and an
edit to it (``state.l2_archival.narrative = ...``,
``state.l1_5_entities.upsert({...})``, ``state.l1_working.append(...)``)
reaches the memory the next time the manager reads or writes: the
narrative and the ledger become chatfold's summary (the ledger as its
``key: value`` lines), L1 its buffer. An edit that cannot be applied
raises ``ValueError`` there and is discarded; the memory is unchanged.

The models serialise with pydantic (``model_dump``, ``model_dump_json``,
``model_validate``, ``model_validate_json``), so storage adapters written
for sawtooth keep working. ``MemoryState.chatfold`` (an addition) carries
chatfold's own state (the Rust crate's JSON), which restoring reads first.
A state saved by sawtooth-memory itself loads too: its L1 messages and its
narrative and ledger become chatfold's buffer and summary.

sawtooth-memory needs pydantic, and so does this module.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Tuple
from uuid import uuid4

try:
    from pydantic import BaseModel, Field, PrivateAttr, ValidationError
except ImportError as error:  # pragma: no cover - pydantic is sawtooth-memory's own dependency
    raise ImportError(
        "chatfold.compat.sawtooth needs pydantic v2, as sawtooth-memory does: pip install pydantic"
    ) from error

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
    "ValidationError",
]

MessageRole = Literal["user", "assistant", "system", "tool"]

# The heading chatfold's fold gives its ledger inside the summary.
LEDGER_SECTION = "\n\nExact identifiers (kept verbatim):\n"


class Message(BaseModel):
    """A turn in working memory (L1); a role outside ``MessageRole`` is a
    ``ValidationError``."""

    id: str = Field(default_factory=lambda: str(uuid4()))
    role: MessageRole
    content: str
    timestamp: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    token_count: int = 0

    def to_openai_dict(self) -> Dict[str, str]:
        """``{"role": ..., "content": ...}``."""
        return {"role": self.role, "content": self.content}


class SystemPrompt(BaseModel):
    """L0: the system prompt, never folded."""

    content: str
    token_count: int = 0


class WorkingMemory(BaseModel):
    """L1: the recent turns kept verbatim."""

    messages: List[Message] = Field(default_factory=list)
    token_count: int = 0

    def append(self, message: Message) -> None:
        """Appends ``message`` and adds its ``token_count``."""
        self.messages.append(message)
        self.token_count += message.token_count

    def slice_oldest(self, n: int) -> List[Message]:
        """Removes and returns the oldest ``n`` messages, taking their tokens off."""
        chunk = self.messages[:n]
        removed = sum(m.token_count for m in chunk)
        self.messages = self.messages[n:]
        self.token_count = max(0, self.token_count - removed)
        return chunk


EntityCallback = Callable[[str, str, Literal["insert", "update"]], None]


class EntityLedger(BaseModel):
    """L1.5: exact values by key, each key's values oldest first (at most
    ``max_history_per_key``). In a manager's state, chatfold's ledger: an
    entry ``key: value`` maps ``key`` to ``[value]``, a bare identifier maps
    to itself."""

    entities: Dict[str, List[str]] = Field(default_factory=dict)
    max_history_per_key: int = Field(default=10, exclude=True)

    _event_callback: Optional[EntityCallback] = PrivateAttr(default=None)

    def set_event_callback(self, callback: Optional[EntityCallback]) -> None:
        """``callback(key, value, "insert" | "update")`` on every change
        :meth:`upsert` makes (``None``: no callback)."""
        self._event_callback = callback

    def upsert(self, new_entities: Dict[str, str]) -> None:
        """Merges ``new_entities``: a new key gets ``[value]`` (``insert``);
        a different value is appended to its key's history (``update``,
        the oldest evicted past ``max_history_per_key``); the key's latest
        value again is a no-op."""
        for key, value in new_entities.items():
            value = str(value)
            history = self.entities.get(key)
            if history is None:
                self.entities[key] = [value]
                operation: Literal["insert", "update"] = "insert"
            else:
                if history and history[-1] == value:
                    continue
                history.append(value)
                if len(history) > self.max_history_per_key:
                    self.entities[key] = history[-self.max_history_per_key :]
                operation = "update"
            if self._event_callback:
                self._event_callback(key, value, operation)

    def get_latest(self, key: str) -> Optional[str]:
        """The latest value of ``key`` (``None``: not in the ledger)."""
        history = self.entities.get(key)
        return history[-1] if history else None

    def get_history(self, key: str) -> List[str]:
        """Every value of ``key``, oldest first."""
        return list(self.entities.get(key, []))

    def to_json_str(self) -> str:
        """The ledger as sawtooth renders it: each key's latest value, and
        ``<key>__history`` for earlier ones."""
        flat: Dict[str, str] = {}
        for key, history in self.entities.items():
            if not history:
                continue
            flat[key] = history[-1]
            if len(history) > 1:
                flat[f"{key}__history"] = " → ".join(history[:-1])
        return json.dumps(flat, indent=2)


class ArchivalMemory(BaseModel):
    """L2: the running summary's narrative (the ledger is L1.5)."""

    narrative: str = ""
    token_count: int = 0

    def append_narrative(self, new_text: str) -> None:
        """Appends ``new_text`` on a line of its own (blank text: nothing)."""
        if not new_text.strip():
            return
        self.narrative = f"{self.narrative}\n{new_text}" if self.narrative else new_text


class SemanticVectorMemory(BaseModel):
    """L3's counts (in a manager's state always empty: chatfold has no L3
    storage); kept through a save and a load."""

    chunk_count: int = 0
    last_indexed_at: Optional[datetime] = None


class DTEState(BaseModel):
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


class MemoryState(BaseModel):
    """The whole state: L0 to L3, the DTE counts, and ``chatfold``
    (chatfold's own state, which restoring reads first)."""

    l0_system: SystemPrompt
    l1_working: WorkingMemory = Field(default_factory=WorkingMemory)
    l1_5_entities: EntityLedger = Field(default_factory=EntityLedger)
    l2_archival: ArchivalMemory = Field(default_factory=ArchivalMemory)
    l3_semantic: SemanticVectorMemory = Field(default_factory=SemanticVectorMemory)
    dte: DTEState = Field(default_factory=DTEState)
    chatfold: Optional[Dict[str, Any]] = None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> "MemoryState":
        """A state from a dict, or from another package's ``MemoryState``
        (sawtooth-memory's own, through its ``model_dump``); a
        ``ValidationError`` (a ``ValueError``) when it is not a state."""
        if not isinstance(obj, (cls, dict)) and hasattr(obj, "model_dump"):
            obj = obj.model_dump(mode="json")
        return super().model_validate(obj, *args, **kwargs)

    def _chatfold_state(self) -> Dict[str, Any]:
        """chatfold's state to restore: its own when saved here, else one
        made from the tiers (:func:`tiers_to_chatfold`)."""
        if isinstance(self.chatfold, dict):
            state = dict(self.chatfold)
            summary = state.get("summary")
            if isinstance(summary, str) and summary.startswith(LEDGER_SECTION.lstrip("\n")):
                # a ledger saved without the section's blank line: the core reads it only with it
                state["summary"] = "\n\n" + summary
            return state
        return tiers_to_chatfold(self.l1_working, self.l1_5_entities, self.l2_archival)


def ledger_summary(narrative: str, ledger: EntityLedger) -> str:
    """chatfold's summary text for a narrative and a ledger: the narrative,
    then the ledger's ``- key: value`` lines (a bare identifier alone), each
    key's history oldest first and a value given again listed at its
    latest place only (so :func:`ledger_map` reads the same latest value back)."""
    lines: List[str] = []
    for key, values in ledger.entities.items():
        for at, value in enumerate(values):
            if value in values[at + 1 :]:
                continue
            lines.append(f"- {value}" if value == key else f"- {key}: {value}")
    narrative = narrative.strip()
    if not lines:
        return narrative
    # the section always opens with its blank line, even after an empty
    # narrative: chatfold's core reads a ledger only after that (as it renders one)
    return narrative + LEDGER_SECTION + "\n".join(lines)


def split_summary(summary: str) -> Tuple[str, List[str]]:
    """chatfold's summary text as (narrative, ledger entries): the inverse of
    :func:`ledger_summary` (a summary that opens with the heading itself,
    as this module wrote one before, reads the same)."""
    heading = LEDGER_SECTION.lstrip("\n")
    if summary.startswith(heading):
        narrative, ledger = "", summary[len(heading):]
    else:
        at = summary.rfind(LEDGER_SECTION)
        if at < 0:
            return summary.strip(), []
        narrative, ledger = summary[:at], summary[at + len(LEDGER_SECTION):]
    entries = [line[2:] for line in ledger.split("\n") if line.startswith("- ") and line[2:]]
    return narrative.strip(), entries


def ledger_map(entries: List[str]) -> Dict[str, List[str]]:
    """Ledger entries as sawtooth's ``key -> [values]``, oldest first: an
    entry ``key: value`` is split at its first ``": "`` (as chatfold's core
    reads it), a bare identifier keys itself; a value listed again moves to
    its key's end (the latest)."""
    out: Dict[str, List[str]] = {}
    for entry in entries:
        key, sep, value = entry.partition(": ")
        if not sep or not key.strip() or not value:
            key, value = entry, entry
        values = out.setdefault(key, [])
        if value in values:
            values.remove(value)
        values.append(value)
    return out


def check_entity_key(key: str) -> None:
    """``ValueError`` for a ledger key chatfold's summary cannot hold
    (one with ``": "`` in it, or spanning lines: it would read back as another key)."""
    if ": " in key or "\n" in key or "\r" in key:
        raise ValueError(f"entity key {key!r}: a key cannot contain ': ' or span lines")


def holdable_entities(entities: Mapping[Any, Any]) -> Dict[str, str]:
    """A compressor's entities as chatfold's ledger can hold them, each on
    its own: a key or value spanning lines put on one (its line breaks
    become spaces), ``": "`` in a key written ``":"`` (it would read back
    as another key), an entry with an empty key or value left out."""
    held: Dict[str, str] = {}
    for key, value in entities.items():
        key = " ".join(str(key).splitlines()).strip().replace(": ", ":")
        value = " ".join(str(value).splitlines()).strip()
        if key and value:
            held[key] = value
    return held


def tiers_to_chatfold(l1: WorkingMemory, ledger: EntityLedger, l2: ArchivalMemory) -> Dict[str, Any]:
    """chatfold's state (``{"version": 2, "summary", "buffer"}``) for L1,
    L1.5 and L2; ``ValueError`` for a turn that is not a message."""
    buffer = []
    for m in l1.messages:
        if not isinstance(m, Message):
            m = Message.model_validate(m)
        buffer.append({"role": m.role, "content": m.content, "id": m.id})
    return {"version": 2, "summary": ledger_summary(l2.narrative, ledger), "buffer": buffer}
