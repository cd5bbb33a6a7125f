"""sawtooth-memory's configuration: the same classes, fields and defaults
(dataclasses here, pydantic models there), with the same checks (a bad value
raises ``ValueError``).

chatfold uses ``soft_limit_tokens``, ``hard_limit_tokens``, ``chunk_size``,
``fallback_truncate``, ``compression_mode``, ``tokenizer_model``,
``background_model``, ``journal_path``, ``storage_adapter``,
``session_id``, ``ollama`` and ``cloud``. The DTE, NER, salience,
observation-crush and novelty knobs are sawtooth's own machinery: they are
accepted, checked as sawtooth checks them, and have no effect. The features
chatfold does not do raise :class:`~.exceptions.NotSupportedError` when a
manager is built with them on (``enable_l3_semantic_storage``, ``pool_id``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Literal, Optional, Tuple

__all__ = [
    "Provider",
    "OllamaConfig",
    "CloudConfig",
    "ContextManagerConfig",
    "infer_cloud_provider",
    "resolve_cloud_api_key",
]


class Provider(str, Enum):
    """Cloud providers of the compression backend."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"


_CLOUD_MODEL_PREFIXES: Dict[Provider, Tuple[str, ...]] = {
    Provider.OPENAI: ("gpt-", "o1", "o3", "chatgpt-"),
    Provider.ANTHROPIC: ("claude-",),
    Provider.GEMINI: ("gemini-",),
}

_PROVIDER_ENV_KEYS: Dict[Provider, Tuple[str, ...]] = {
    Provider.OPENAI: ("OPENAI_API_KEY",),
    Provider.ANTHROPIC: ("ANTHROPIC_API_KEY",),
    Provider.GEMINI: ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}


def infer_cloud_provider(model: str) -> Optional[Provider]:
    """The cloud provider a model name belongs to (``None``: a local Ollama model)."""
    normalized = model.lower()
    for provider, prefixes in _CLOUD_MODEL_PREFIXES.items():
        if any(normalized.startswith(prefix) for prefix in prefixes):
            return provider
    return None


def resolve_cloud_api_key(provider: Provider) -> Optional[str]:
    """The provider's API key from its usual environment variables, if set."""
    for name in _PROVIDER_ENV_KEYS[provider]:
        value = os.environ.get(name)
        if value:
            return value
    return None


@dataclass
class OllamaConfig:
    """A local Ollama (chatfold calls its OpenAI-compatible API under ``/v1``)."""

    base_url: str = "http://localhost:11434"
    model: str = "phi4-mini:latest"
    timeout_seconds: int = 90


# A required CloudConfig field not given (pydantic reports it missing).
_REQUIRED: Any = object()


@dataclass
class CloudConfig:
    """A cloud provider's API (OpenAI, Anthropic, Gemini); ``base_url``
    routes through a proxy. ``api_key`` is kept as pydantic's ``SecretStr``
    (``str`` and ``repr`` hide it; ``api_key.get_secret_value()`` reads it).
    ``provider``, ``model`` and ``api_key`` are required: one left out is
    pydantic's ``ValidationError``, as in sawtooth."""

    provider: Provider = _REQUIRED
    model: str = _REQUIRED
    api_key: Any = _REQUIRED
    base_url: Optional[str] = None
    timeout_seconds: int = 60

    def __post_init__(self) -> None:
        from pydantic import SecretStr
        from pydantic_core import ValidationError

        missing = [name for name in ("provider", "model", "api_key") if getattr(self, name) is _REQUIRED]
        if missing:
            raise ValidationError.from_exception_data(
                "CloudConfig", [{"type": "missing", "loc": (name,), "input": {}} for name in missing]
            )
        try:
            self.provider = Provider(self.provider)
        except ValueError:
            raise ValueError(f"provider must be one of {[p.value for p in Provider]}, got {self.provider!r}") from None
        if hasattr(self.api_key, "get_secret_value"):
            self.api_key = self.api_key.get_secret_value()
        if not isinstance(self.api_key, str):
            raise ValueError("api_key must be a string")
        self.api_key = SecretStr(self.api_key)


@dataclass
class ContextManagerConfig:
    """sawtooth's configuration, with its defaults (see the module's docs
    for what chatfold uses)."""

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
        """sawtooth's preset for scripts and WSGI apps (``SyncContextManager``): L3 off."""
        return cls(soft_limit_tokens=soft_limit_tokens, enable_l3_semantic_storage=False, **overrides)

    def __post_init__(self) -> None:
        if isinstance(self.cloud, dict):  # pydantic reads a dict into the model, so does this
            self.cloud = CloudConfig(**self.cloud)
        if isinstance(self.ollama, dict):
            self.ollama = OllamaConfig(**self.ollama)
        for name in ["soft_limit_tokens", "hard_limit_tokens", "chunk_size"]:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if self.compression_mode not in ("dte", "always_llm"):
            raise ValueError(f"compression_mode must be 'dte' or 'always_llm', got {self.compression_mode!r}")
        if self.obs_crush_min_tokens < 1:
            raise ValueError("obs_crush_min_tokens must be positive.")
        if self.obs_cache_max_entries < 1:
            raise ValueError("obs_cache_max_entries must be positive.")
        if self.narrative_debt_trigger_tokens < 1:
            raise ValueError("narrative_debt_trigger_tokens must be positive.")
        if not 0.0 <= self.background_spend_ratio <= 1.0:
            raise ValueError("background_spend_ratio must be between 0.0 and 1.0.")
        if not 0.0 <= self.novelty_min_residual <= 1.0:
            raise ValueError("novelty_min_residual must be between 0.0 and 1.0.")
        if not 0.0 <= self.salience_threshold <= 1.0:
            raise ValueError("salience_threshold must be between 0.0 and 1.0.")
        if self.salience_max_entities < 1:
            raise ValueError("salience_max_entities must be positive.")
        if self.enable_l3_semantic_storage:
            self._check_l3()
        self._cascade_background_model()

    def _check_l3(self) -> None:
        """sawtooth's checks of an L3 configuration (chatfold's managers
        then refuse L3: it is not supported)."""
        if self.storage_adapter is None:
            raise ValueError(
                "enable_l3_semantic_storage=True requires storage_adapter (PostgresStorageAdapter with pgvector)."
            )
        from .storage.semantic import supports_semantic_storage

        if not supports_semantic_storage(self.storage_adapter):
            raise ValueError(
                "enable_l3_semantic_storage=True requires a SemanticStorageAdapter "
                "(e.g. PostgresStorageAdapter). RedisStorageAdapter does not support L3."
            )
        dimension = getattr(self.storage_adapter, "embedding_dimension", None)
        if dimension is not None and dimension != self.embedding_dimension:
            raise ValueError(
                f"embedding_dimension ({self.embedding_dimension}) must match "
                f"storage_adapter.embedding_dimension ({dimension})."
            )
        if self.embedding_backend not in ("hash", "openai"):
            raise ValueError(f"embedding_backend must be 'hash' or 'openai', got {self.embedding_backend!r}.")

    def _cascade_background_model(self) -> None:
        """sawtooth's ``background_model`` routing: it overrides the cloud or
        Ollama model, or picks a provider by its name."""
        model = self.background_model
        if not model:
            return
        if self.cloud:
            self.cloud.model = model
        if self.ollama:
            self.ollama.model = model
        elif not self.cloud:
            provider = infer_cloud_provider(model)
            if provider is None:
                self.ollama = OllamaConfig(model=model)
                return
            key = resolve_cloud_api_key(provider)
            if not key:
                names = " or ".join(_PROVIDER_ENV_KEYS[provider])
                raise ValueError(
                    f"background_model={model!r} requires a {provider.value} API key. Set {names} in your "
                    "environment, or pass an explicit cloud=CloudConfig(...)."
                )
            self.cloud = CloudConfig(provider=provider, model=model, api_key=key)
