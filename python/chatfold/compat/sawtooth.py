"""sawtooth-memory 0.3.0's core API over chatfold's tiered memory:
``from chatfold.compat import sawtooth``, then ``sawtooth.ContextManager``.

The same names, signatures and defaults for the async manager and its
configuration (``ContextManager``, ``ContextManagerConfig``,
``OllamaConfig``, ``CloudConfig``, ``Provider``): ``async with``,
``add_message``, ``build_prompt``, ``get_stats``. Compression is chatfold's:
a background asyncio task folds the oldest chunks into one summary with an
exact-identifier ledger, through the configured backend (Ollama's or a cloud
provider's OpenAI-compatible or Anthropic API, run in Rust) or through a
``summarize`` callable (an addition: ``f(request) -> str``, or a coroutine
function).

sawtooth's defect is fixed: its prompt can pass ``hard_limit_tokens`` while
a compression is slow or failing; here ``build_prompt()`` never returns more
than ``hard_limit_tokens`` (counted with o200k_base): the oldest turns leave
the prompt, not the state, until their fold lands. The prompt's layout
differs: the system prompt is its own message, then one summary message
(the narrative, then the ledger of exact identifiers), then the recent turns
(sawtooth puts L0 and its ledger in one ``[SYSTEM_L0]`` message). Only the async
``ContextManager`` is mirrored: not ``SyncContextManager``, the storage
adapters, events, embeddings, L3 retrieval or the DTE runtime (their
configuration fields are accepted and ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Optional

from .. import _chatfold
from ..memory import TieredMemory

__all__ = ["ContextManager", "ContextManagerConfig", "OllamaConfig", "CloudConfig", "Provider"]

__version__ = "0.3.0"


class Provider(str, Enum):
    """Cloud providers."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"


@dataclass
class OllamaConfig:
    """A local Ollama (its OpenAI-compatible API under ``/v1``)."""

    base_url: str = "http://localhost:11434"
    model: str = "phi4-mini:latest"
    timeout_seconds: int = 90


@dataclass
class CloudConfig:
    """A cloud provider's API."""

    provider: Provider
    model: str
    api_key: Any
    base_url: Optional[str] = None
    timeout_seconds: int = 60


@dataclass
class ContextManagerConfig:
    """sawtooth's configuration, with its defaults. chatfold uses the limits,
    ``chunk_size``, ``fallback_truncate``, ``ollama`` and ``cloud``; the
    other fields are kept for compatibility."""

    soft_limit_tokens: int = 1000
    hard_limit_tokens: int = 2500
    chunk_size: int = 4
    fallback_truncate: bool = True
    max_unsummarized_turns: Optional[int] = None
    compression_mode: Literal["dte", "always_llm"] = "dte"
    enable_observation_crush: bool = True
    obs_crush_min_tokens: int = 800
    obs_cache_max_entries: int = 32
    narrative_debt_trigger_tokens: int = 2000
    background_spend_ratio: float = 0.1
    enable_novelty_filter: bool = True
    novelty_min_residual: float = 0.15
    consolidation_on_idle: bool = True
    enable_sync_consolidation: bool = False
    enable_intent_prompt_planner: bool = True
    omit_l2_when_ledger_covers: bool = True
    compression_guideline: Optional[str] = None
    persist_every_message: bool = False
    background_model: Optional[str] = None
    tokenizer_model: str = "gpt-4o"
    journal_path: str = ".sawtooth_journal.jsonl"
    enable_deterministic_ner: bool = True
    custom_ner_patterns: Dict[str, str] = field(default_factory=dict)
    enable_salience_extractor: bool = True
    salience_threshold: float = 0.5
    salience_max_entities: int = 20
    enable_ingest_entity_scan: bool = True
    enable_entity_verifier: bool = True
    storage_adapter: Optional[Any] = None
    session_id: str = "local_default"
    pool_id: Optional[str] = None
    enable_l3_semantic_storage: bool = False
    enable_l3_prompt_retrieval: bool = True
    l3_retrieval_top_k: int = 3
    l3_retrieval_max_tokens: int = 500
    embedding_backend: str = "hash"
    embedding_model: str = "text-embedding-3-small"
    embedding_dimension: int = 1536
    l3_chunk_max_chars: int = 2000
    ollama: Optional[OllamaConfig] = None
    cloud: Optional[CloudConfig] = None

    @classmethod
    def for_sync_script(cls, *, soft_limit_tokens: int = 2000, **overrides: Any) -> "ContextManagerConfig":
        """A configuration for a short script (sawtooth's preset)."""
        return cls(soft_limit_tokens=soft_limit_tokens, **overrides)


_CLOUD_URLS = {
    Provider.OPENAI: "https://api.openai.com/v1",
    Provider.ANTHROPIC: "https://api.anthropic.com",
    Provider.GEMINI: "https://generativelanguage.googleapis.com/v1beta/openai",
}


def _backend(config: ContextManagerConfig) -> Any:
    """The summarizer the configuration names (run in Rust)."""
    cloud = config.cloud
    if cloud is not None:
        key = cloud.api_key.get_secret_value() if hasattr(cloud.api_key, "get_secret_value") else cloud.api_key
        provider = Provider(cloud.provider)
        url = cloud.base_url or _CLOUD_URLS[provider]
        make = _chatfold.AnthropicSummarizer if provider is Provider.ANTHROPIC else _chatfold.OpenAISummarizer
        return make(url, cloud.model, api_key=key, timeout=float(cloud.timeout_seconds))
    ollama = config.ollama or OllamaConfig()
    model = config.background_model or ollama.model
    return _chatfold.OpenAISummarizer(
        ollama.base_url.rstrip("/") + "/v1", model, timeout=float(ollama.timeout_seconds)
    )


def _tokenizer(model: str) -> str:
    try:
        _chatfold.count_text("", model)
        return model
    except Exception:
        return "o200k_base"


class ContextManager:
    """Async hierarchical memory: L0 system prompt, L2 summary with the L1.5
    ledger, L1 recent turns. Adds never wait for compression."""

    def __init__(
        self,
        system_prompt: str,
        config: Optional[ContextManagerConfig] = None,
        *,
        enable_events: bool = True,
        journal_path: Optional[Path] = None,
        summarize: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        self._config = config or ContextManagerConfig()
        c = self._config
        self._memory = TieredMemory(
            c.soft_limit_tokens,
            c.hard_limit_tokens,
            summarize if summarize is not None else _backend(c),
            system=[{"role": "system", "content": system_prompt}] if system_prompt else [],
            tokenizer=_tokenizer(c.tokenizer_model),
            chunk_size=c.chunk_size,
            fallback_truncate=c.fallback_truncate,
        )
        self._running = False

    async def start(self) -> None:
        """Starts the background compression worker."""
        self._memory.start()
        self._running = True

    async def stop(self) -> None:
        """Stops the worker; nothing in the memory is lost."""
        await self._memory.stop()
        self._running = False

    async def __aenter__(self) -> "ContextManager":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def add_message(self, role: Literal["user", "assistant", "system", "tool"], content: str) -> None:
        """Appends a turn to L1; never waits for a compression."""
        self._memory.add_message({"role": role, "content": content})

    async def build_prompt(self, *, retrieval_query: Optional[str] = None) -> List[Dict[str, str]]:
        """The prompt: L0, the summary with its ledger, L1; never more than
        ``hard_limit_tokens``."""
        return self._memory.messages()

    def get_stats(self) -> dict:
        """Tokens per layer and the worker's counts (sawtooth's keys, plus
        chatfold's own under ``"chatfold"``)."""
        s = self._memory.stats()
        return {
            "l0_tokens": s["system_tokens"],
            "l1_tokens": s["buffer_tokens"],
            "l1_message_count": s["buffer_messages"],
            "l2_tokens": s["summary_tokens"],
            "l3_chunk_count": 0,
            "l3_enabled": False,
            "worker": {
                "processed": s["folds_done"],
                "failed": s["folds_failed"],
                "queue_depth": s["folds_pending"],
                "running": self._running,
            },
            "chatfold": s,
        }
