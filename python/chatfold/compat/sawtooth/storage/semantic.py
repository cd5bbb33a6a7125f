"""sawtooth-memory's L3 semantic storage contract. chatfold has no L3 tier:
the contract and the result type exist so adapters and type hints written
for sawtooth import; a manager configured with L3 on raises
:class:`~..exceptions.NotSupportedError`, and so do the vector methods of
:class:`~.postgres_adapter.PostgresStorageAdapter` (it keeps the contract's
class, as sawtooth's does, for code that checks it)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import List, Sequence, Tuple

__all__ = ["SemanticChunkResult", "SemanticStorageAdapter", "supports_semantic_storage"]


@dataclass(frozen=True)
class SemanticChunkResult:
    """A text chunk found by a similarity search."""

    text: str
    similarity: float


class SemanticStorageAdapter(ABC):
    """The L3 vector storage interface (sawtooth's)."""

    @abstractmethod
    async def upsert_vector_chunks_batch(self, session_id: str, chunks: Sequence[Tuple[str, List[float]]]) -> int:
        """Stores chunks and their embeddings; the number stored."""

    @abstractmethod
    async def search_similar(self, session_id: str, query_embedding: List[float], top_k: int = 5) -> List[SemanticChunkResult]:
        """The ``top_k`` chunks most similar to ``query_embedding``."""

    @abstractmethod
    async def count_vector_chunks(self, session_id: str) -> int:
        """How many chunks the session has."""

    async def upsert_vector_chunk(self, session_id: str, text: str, embedding: List[float]) -> None:
        """Stores one chunk."""
        await self.upsert_vector_chunks_batch(session_id, [(text, embedding)])


def supports_semantic_storage(adapter: object) -> bool:
    """Whether ``adapter`` implements the L3 contract."""
    return isinstance(adapter, SemanticStorageAdapter)
