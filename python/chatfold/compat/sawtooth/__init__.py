"""sawtooth-memory 0.3.0's public API over chatfold's tiered memory.

Switch with one import: ``import chatfold.compat.sawtooth as sawtooth_memory``
(or ``from chatfold.compat.sawtooth import ContextManager, ...``); every
name the original's package exports (``__all__``) and every public
submodule (``chatfold.compat.sawtooth.config``, ``.events``, ``.storage``,
``.state``, ...) imports. What is mirrored how:

Working the same, tested against sawtooth-memory on the same inputs and by
its own test suite
    ``ContextManager`` (async, ``async with``), ``SyncContextManager``
    (sync, folds inline), ``SawtoothSyncWrapper`` (sync calls, folds in the
    background on an event loop of its own); ``ContextManagerConfig`` (every
    field and default, sawtooth's checks), ``OllamaConfig``, ``CloudConfig``
    (its key a pydantic ``SecretStr``), ``Provider``; ``add_message``,
    ``build_prompt``, ``get_stats`` (sawtooth's keys, plus ``chatfold``),
    ``explain_prompt`` (each ledger key's values, its last operation read
    from the journal, where the async manager records its ledger's changes
    as sawtooth's does), ``health_check`` (the compressor's ``ping``),
    ``pin_entity``; ``state``: sawtooth's tier classes (pydantic models:
    ``Message``, ``WorkingMemory``, ``EntityLedger``, ``ArchivalMemory``,
    ...), one live object that follows the memory and whose edits reach it
    (:mod:`.state`); ``TokenMonitor``, ``CompressionWorker`` (its
    ``enqueue`` called for each cycle sawtooth would queue), the event bus,
    the event types and the journal; the storage contract
    (``BaseStorageAdapter``), ``RedisStorageAdapter`` and
    ``PostgresStorageAdapter`` (no L3); the compressors and the provider
    adapters; the exceptions. The managers look their compressor, monitor
    and worker classes up in their own modules when made, so a test's
    patch of ``middleware.OllamaCompressor`` or
    ``sync_manager.SyncOllamaCompressor`` takes effect.

    Folds, budgets, counting and the ledger are chatfold's (its Rust core);
    this package renders and reports. ``compression_mode="dte"`` (sawtooth's
    default: folds without a model) folds with chatfold's extractive
    summarizer; ``"always_llm"`` with the configured Ollama or cloud backend
    (chatfold's HTTP summarizers, in Rust; the sync manager through its
    ``SyncOllamaCompressor`` / ``SyncCloudCompressor``, each fold's narrative
    appended to L2 as sawtooth does); ``summarize=`` (an addition) takes any
    ``f(request) -> str`` or coroutine function.

Where chatfold is stricter, sawtooth's way, and ``strict=True`` for chatfold's
    At the hard limit with ``fallback_truncate`` in ``"always_llm"`` mode,
    the oldest ``chunk_size`` turns leave L1 at once and L2 notes it (the
    latest turn always stays; not while a fold is under way, whose landing
    shrinks L1, as rebuilding the memory would abandon it). When L1 is past
    the soft limit and chatfold's core has nothing to fold (it never folds
    the latest turn), a queued cycle takes the oldest ``chunk_size`` turns,
    the latest included, as sawtooth's does in both modes: the async
    manager sends the cycle's ``L1EvictionEvent`` when it is queued and
    folds the turns in the background with its summarizer (see
    :mod:`._latest`), the sync manager with its compressor (in
    ``"always_llm"`` mode) inline.
    ``strict=True`` (on each manager): no turn leaves the state before its
    fold lands (the prompt stays within the hard limit all the same), turns
    are dropped only after repeated fold failures, and the latest turn is
    never folded.

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
    (ledger entries inserted, updated or gone, and each ``upsert`` on the
    live ledger), then in DTE mode ``DTEFoldCreatedEvent`` (as sawtooth: no
    summary event, nothing journalled), else ``L2SummaryGeneratedEvent`` and
    ``CompressionCycleCompleteEvent`` (journalled); or
    ``CompressionCycleFailedEvent`` (also when an applied edit abandons a
    fold in flight: ``error_type="FoldAbandoned"``); ``L1EvictionEvent`` with
    ``trigger="hard_limit_forced"`` when the core drops turns after repeated
    fold failures. sawtooth's hard-limit truncation emits none, as in
    sawtooth. ``L3VectorIndexedEvent`` is never fired. As in sawtooth,
    ``SyncContextManager`` emits none. sawtooth reports a cycle's
    ``L1EvictionEvent`` when it queues the cycle; chatfold when its fold
    lands (the turns leave L1 then), but for the cycle of the latest turn,
    reported when queued as in sawtooth.

What still differs, by design, and why
    chatfold's core decides how much one fold takes (whole turns, not
    exactly ``chunk_size`` messages) and keeps one running summary (no DTE
    ``[FOLD ...]`` stubs, no later LLM consolidation): its folds keep the
    exact identifiers verbatim in one ledger. So the turns a queued cycle
    would take stay in L1 until their fold lands (a patched
    ``CompressionWorker.enqueue`` does not stop chatfold's folds); in DTE
    mode nothing is truncated at the hard limit (the extractive fold is
    never lost work); the sync manager folds the latest turn only with its
    compressor (sawtooth's folds it in both modes, in DTE mode into a
    ``[FOLD ...]`` stub at once). Applying an edit of
    ``state`` rebuilds the tiered memory from the edited tiers, merged
    with a fold that landed since the edit began (a fold still in flight
    is done again; the stats' counters carry over). An edit that cannot be
    merged with that fold (a rewritten narrative, a turn changed or removed
    after the fold took it) is applied to the state it started from and
    the fold is dropped: its turns are folded again, from the edited state,
    when the next turn comes (nothing is lost, and a redacted turn's old
    text does not stay in the summary). A ledger key's history
    goes through chatfold's summary as its distinct values, the latest
    last (a value given again moves to the end); a key cannot hold
    ``": "``. The ledger has a cap where sawtooth's has none: each fold
    keeps the entries that fit the ledger's share of the summary (chatfold's
    fold policy gives it a part of the summary's token allowance, which the
    hard limit bounds), and drops the rest; a large ledger set by hand
    shrinks at the next fold (301 entries to about 200 with a 5,000-token
    hard limit). ``RedisStorageAdapter`` saves the whole
    state (sawtooth's loses the summary and ledger on reload). The
    compressors return chatfold's plain-text summary and ledger, not
    sawtooth's JSON-mode answer (see :mod:`.compressor`). The NER,
    salience, observation-crush, novelty and intent-planner settings have
    no effect. sawtooth's own tests of these, and those that read private
    attributes, are listed with their reasons in the repository's
    ``python/tests/seeds/sawtooth_skips.py``.

The LangGraph and LangChain ``integrations`` (``SawtoothLangGraphAdapter``,
``build_sawtooth_graph``, ``SawtoothChatMessageHistory``) work as
sawtooth's, with its frameworks installed (a tool result reaches the model
only beside the call that asked for it).

Not supported (the names import; using them raises :class:`NotSupportedError`)
    L3 semantic storage and retrieval (``enable_l3_semantic_storage``,
    ``embeddings``, ``l3_indexer``, the Postgres adapter's vector methods),
    multi-agent pools (``pool_id``), and sawtooth's internal machinery
    modules (``ner``, ``salience``, ``fold_unit``, ``dte_runtime``,
    ``compression_core``'s cycle, ``entity_guard``, ``intent_planner``,
    ``novelty``, ``observation_crush``, ``prompt_compiler``).

This package needs pydantic (v2), as sawtooth-memory does.
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
