"""sawtooth-memory 0.3.0's public API over chatfold's tiered memory.

Switch with one import: ``import chatfold.compat.sawtooth as sawtooth_memory``
(or ``from chatfold.compat.sawtooth import ContextManager, ...``); every
name the original's package exports (``__all__``) and every public
submodule (``chatfold.compat.sawtooth.config``, ``.events``, ``.storage``,
``.state``, ...) imports. What is mirrored how:

Working the same, tested against sawtooth-memory on the same inputs
    ``ContextManager`` (async, ``async with``), ``SyncContextManager``
    (sync, folds inline), ``SawtoothSyncWrapper`` (sync calls, folds in the
    background on an event loop of its own); ``ContextManagerConfig`` (every
    field and default, sawtooth's checks), ``OllamaConfig``, ``CloudConfig``,
    ``Provider``; ``add_message``, ``build_prompt``, ``get_stats`` (sawtooth's
    keys, plus ``chatfold``), ``explain_prompt``, ``health_check``,
    ``state`` (a frozen :class:`MemoryState` snapshot); the event bus, the
    event types and the journal; the storage contract
    (``BaseStorageAdapter``) and ``RedisStorageAdapter``; the exceptions.

    Folds, budgets, counting and the ledger are chatfold's (its Rust core);
    this package renders and reports. ``compression_mode="dte"`` (sawtooth's
    default: folds without a model) folds with chatfold's extractive
    summarizer; ``"always_llm"`` with the configured Ollama or cloud backend
    (chatfold's HTTP summarizers, in Rust); ``summarize=`` (an addition)
    takes any ``f(request) -> str`` or coroutine function.

The prompt
    sawtooth's layout: one system message with ``[SYSTEM_L0]``, then
    ``[ARCHIVE_L2]`` (the summary's narrative) and ``[ENTITY_LEDGER_L1_5]``
    (chatfold's ledger, one ``- identifier`` or ``- key: value`` line each,
    where sawtooth writes a JSON object of its NER's keys), then L1's turns
    verbatim as ``{"role", "content"}``. sawtooth's defect is fixed: its
    prompt passes ``hard_limit_tokens`` while compression lags (its hard
    limit only watches L1, and the system block is not counted); here
    ``build_prompt()`` never returns more than ``hard_limit_tokens`` (counted
    with the ``tokenizer_model``'s encoding, cl100k_base for an unknown
    model as in sawtooth): the oldest turns leave the prompt, not the state,
    until their fold lands. When even the system block and the latest turn
    do not fit, the core's own layout is returned (its guarantee).

Events (same names and payload fields, on the process's bus)
    ``SoftLimitReachedEvent`` / ``HardLimitReachedEvent`` when L1 crosses a
    limit; per fold ``CompressionCycleStartEvent``, then when it lands
    ``L1EvictionEvent`` (the folded messages' ids), ``EntityAnchoredEvent``
    (ledger entries inserted, updated or gone), then in DTE mode
    ``DTEFoldCreatedEvent`` (as sawtooth: no summary event, nothing
    journalled), else ``L2SummaryGeneratedEvent`` and
    ``CompressionCycleCompleteEvent`` (journalled); or
    ``CompressionCycleFailedEvent``; ``L1EvictionEvent`` with
    ``trigger="hard_limit_forced"`` when ``fallback_truncate`` drops messages
    after repeated failures. ``L3VectorIndexedEvent`` is never fired. As in
    sawtooth, ``SyncContextManager`` emits none.

Behaviour that differs, by design
    chatfold's core decides how much one fold takes (whole turns, not
    exactly ``chunk_size`` messages) and keeps one running summary (no DTE
    ``[FOLD ...]`` stubs, no later LLM consolidation); ``fallback_truncate``
    drops turns from the state only after repeated fold failures (sawtooth
    drops at once). ``RedisStorageAdapter`` saves the whole state (sawtooth's
    loses the summary and ledger on reload). The NER, salience,
    observation-crush, novelty and intent-planner settings have no effect.

The LangGraph and LangChain ``integrations`` (``SawtoothLangGraphAdapter``,
``build_sawtooth_graph``, ``SawtoothChatMessageHistory``) work as
sawtooth's, with its frameworks installed (a tool result reaches the model
only beside the call that asked for it).

Not supported (the names import; using them raises :class:`NotSupportedError`)
    L3 semantic storage and retrieval (``enable_l3_semantic_storage``,
    ``embeddings``, ``l3_indexer``), ``PostgresStorageAdapter``, multi-agent
    pools (``pool_id``), ``pin_entity``, the ``providers`` adapters, and
    sawtooth's internal
    machinery modules (``compressor``, ``sync_compressor``, ``worker``,
    ``monitor``, ``ner``, ``salience``, ``fold_unit``, ``dte_runtime``,
    ``compression_core``, ``compression_utils``, ``entity_guard``,
    ``intent_planner``, ``novelty``, ``observation_crush``,
    ``prompt_compiler``).
"""

from .config import CloudConfig, ContextManagerConfig, OllamaConfig, Provider
from .embeddings import (
    EmbeddingProvider,
    HashEmbeddingProvider,
    OpenAIEmbeddingProvider,
    create_embedding_provider,
)
from .events import (
    CompressionCycleCompleteEvent,
    CompressionCycleFailedEvent,
    CompressionCycleStartEvent,
    DTEFoldCreatedEvent,
    EntityAnchoredEvent,
    EventBus,
    HardLimitReachedEvent,
    L1EvictionEvent,
    L2SummaryGeneratedEvent,
    L3VectorIndexedEvent,
    SawtoothEvent,
    SoftLimitReachedEvent,
    get_event_bus,
    make_journal_handler,
    reset_event_bus,
)
from .exceptions import (
    CompressionError,
    MalformedOutputError,
    NotSupportedError,
    OllamaConnectionError,
    SawtoothError,
    TokenLimitExceededError,
)
from .middleware import ContextManager
from .state import MemoryState
from .storage import (
    BaseStorageAdapter,
    PostgresStorageAdapter,
    RedisStorageAdapter,
    SemanticChunkResult,
)
from .sync_manager import SyncContextManager
from .sync_wrapper import SawtoothSyncWrapper

__all__ = [
    # Managers
    "ContextManager",
    "SyncContextManager",
    "SawtoothSyncWrapper",
    # Config
    "ContextManagerConfig",
    "OllamaConfig",
    "CloudConfig",
    "Provider",
    # State
    "MemoryState",
    "SemanticChunkResult",
    # Storage
    "BaseStorageAdapter",
    "RedisStorageAdapter",
    "PostgresStorageAdapter",
    # Events
    "EventBus",
    "get_event_bus",
    "reset_event_bus",
    "make_journal_handler",
    "SawtoothEvent",
    "L1EvictionEvent",
    "EntityAnchoredEvent",
    "L2SummaryGeneratedEvent",
    "CompressionCycleStartEvent",
    "CompressionCycleCompleteEvent",
    "CompressionCycleFailedEvent",
    "SoftLimitReachedEvent",
    "HardLimitReachedEvent",
    "DTEFoldCreatedEvent",
    "L3VectorIndexedEvent",
    # Embeddings
    "EmbeddingProvider",
    "HashEmbeddingProvider",
    "OpenAIEmbeddingProvider",
    "create_embedding_provider",
    # Exceptions
    "SawtoothError",
    "CompressionError",
    "OllamaConnectionError",
    "MalformedOutputError",
    "TokenLimitExceededError",
]

__version__ = "0.3.0"
