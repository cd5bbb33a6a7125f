"""The tests of sawtooth-memory 0.3.0's own suite that do not run against
``chatfold.compat.sawtooth``, each with its reason: the ``seed_alias``
plugin skips them when it runs that suite (and no other).

Only two kinds of test are here, as the compat module's promise draws the
line: a test that reads an underscore-prefixed (private) attribute of
sawtooth's objects, and a test of machinery chatfold does differently by
design (L3 and embeddings, NER with its entity guard, DTE folds, salience,
multi-agent pools). Every other test of the suite runs.

sawtooth's Postgres tests (``tests/test_postgres_adapter.py``) use no
server: they wire mocks into the adapter's private ``_pool`` and
``_schema_ready``, and six of the eight test the pgvector tier (L3), so all
eight are here. ``PostgresStorageAdapter`` is tested against a PostgreSQL
server the test starts in ``python/tests/test_compat_sawtooth_postgres.py``.

A key is a test's node id, or a file's path for all of its tests."""

from typing import Dict, Optional, Tuple

UNDERSCORE = "reads underscore-prefixed attributes"
L3 = "L3 and embeddings"
NER = "NER"
DTE = "DTE folds"
SALIENCE = "salience"
POOLS = "multi-agent pools"

CATEGORIES = (UNDERSCORE, L3, NER, DTE, SALIENCE, POOLS)

_CLOUD = "tests/test_cloud_compressor.py::"
_GET_CLIENT = "patches the compressor's private _get_client (sawtooth's httpx client; chatfold's HTTP is in Rust)"
_DTE_WHY = "sawtooth's DTE fold stubs, observation crush, novelty and intent planner; chatfold folds into one running summary"
_NER_WHY = "sawtooth's regex NER pipeline; chatfold's ledger finds exact identifiers its own way"
_GUARD_WHY = "sawtooth's entity guard (its NER's protection manifest and verifier); chatfold's ledger keeps identifiers verbatim instead"
_PG_PRIVATE = "wires a mock pool into the adapter's private _pool and _schema_ready"

# (category, reason) by node id or file
SKIPS: Dict[str, Tuple[str, str]] = {
    # -- underscore-prefixed attributes --------------------------------------
    "tests/test_middleware.py::TestBuildPrompt::test_tier_ordering": (
        UNDERSCORE,
        "sets cm._config, cm._retrieve_l3_chunks and cm._l3_indexer (an L3 prompt block)",
    ),
    "tests/test_middleware.py::TestHardTruncate::test_force_truncate_releases_compression_debounce_lock": (
        UNDERSCORE,
        "reads cm._monitor._is_compression_queued and calls cm._force_truncate",
    ),
    "tests/test_sync_wrapper.py::test_sync_wrapper_l3_search_and_count": (
        UNDERSCORE,
        "reads memory._portal and cm._worker.index_l3_semantic (L3 too)",
    ),
    "tests/test_postgres_adapter.py::test_postgres_save_load_delete_lifecycle": (UNDERSCORE, _PG_PRIVATE),
    "tests/test_postgres_adapter.py::test_postgres_load_returns_none_for_missing_session": (UNDERSCORE, _PG_PRIVATE),
    "tests/test_compressor.py::TestParseOutput::test_valid_json": (UNDERSCORE, "calls compressor._parse_output"),
    "tests/test_compressor.py::TestParseOutput::test_json_with_markdown_fence": (UNDERSCORE, "calls compressor._parse_output"),
    "tests/test_compressor.py::TestParseOutput::test_missing_entities_defaults_empty": (
        UNDERSCORE,
        "calls compressor._parse_output",
    ),
    "tests/test_compressor.py::TestParseOutput::test_malformed_json_returns_raw_as_narrative": (
        UNDERSCORE,
        "calls compressor._parse_output",
    ),
    "tests/test_compressor.py::TestParseOutput::test_entities_cast_to_str": (UNDERSCORE, "calls compressor._parse_output"),
    "tests/test_compressor.py::TestCompress::test_compress_success": (UNDERSCORE, _GET_CLIENT),
    "tests/test_compressor.py::TestCompress::test_compress_connection_error": (UNDERSCORE, _GET_CLIENT),
    "tests/test_sync_compressor.py::test_sync_ollama_compress_parses_json": (UNDERSCORE, _GET_CLIENT),
    "tests/test_sync_compressor.py::test_sync_ollama_compress_connect_error": (UNDERSCORE, _GET_CLIENT),
    "tests/test_sync_compressor.py::test_sync_ollama_prunes_base64": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorOpenAI::test_compress_success": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorOpenAI::test_compress_connection_error_raises": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorOpenAI::test_compress_timeout_raises": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorOpenAI::test_non_429_http_error_raises_without_retry": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorOpenAI::test_entities_cast_to_strings": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorAnthropic::test_compress_success_tool_use": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorAnthropic::test_compress_payload_includes_tools": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorGemini::test_compress_success": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestCloudCompressorGemini::test_compress_payload_json_mime": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestRateLimitRetry::test_retries_on_429_then_succeeds": (UNDERSCORE, _GET_CLIENT),
    _CLOUD + "TestRateLimitRetry::test_raises_after_max_attempts": (UNDERSCORE, _GET_CLIENT),
    # -- L3 and embeddings ---------------------------------------------------
    "tests/test_l3_indexer.py": (L3, "sawtooth's L3 chunker and semantic indexer"),
    "tests/test_l3_integration.py": (L3, "L3 semantic storage and retrieval in the managers"),
    "tests/test_l3_worker.py": (L3, "the worker's L3 indexing"),
    "tests/test_embeddings.py": (L3, "the embedding providers"),
    "tests/test_postgres_adapter.py::test_postgres_upsert_vector_chunk": (L3, "pgvector chunks (and " + _PG_PRIVATE + ")"),
    "tests/test_postgres_adapter.py::test_postgres_upsert_vector_chunks_batch": (L3, "pgvector chunks (and " + _PG_PRIVATE + ")"),
    "tests/test_postgres_adapter.py::test_postgres_search_similar": (L3, "pgvector search (and " + _PG_PRIVATE + ")"),
    "tests/test_postgres_adapter.py::test_postgres_count_vector_chunks": (L3, "pgvector chunks (and " + _PG_PRIVATE + ")"),
    "tests/test_postgres_adapter.py::test_postgres_batch_insert_empty_is_noop": (
        L3,
        "pgvector chunks (and " + _PG_PRIVATE + ")",
    ),
    "tests/test_postgres_adapter.py::test_postgres_bootstrap_schema_on_first_use": (
        L3,
        "expects the bootstrap to create the pgvector extension, a VECTOR(384) table and its index",
    ),
    "tests/test_public_api.py::test_storage_and_embeddings_construct_without_live_backends": (
        L3,
        "builds a hash embedding provider",
    ),
    # -- NER (with the entity guard, which is built on it) -------------------
    "tests/test_ner.py": (NER, _NER_WHY),
    "tests/test_entity_guard.py": (NER, _GUARD_WHY),
    "tests/test_entity_guard_worker.py": (NER, _GUARD_WHY + "; salience entities too"),
    "tests/test_compression_core.py::test_fallback_merge_preserves_salience_entities": (
        NER,
        "sawtooth's compression cycle with its NER pipeline and salience extractor",
    ),
    "tests/test_compression_core.py::test_run_compression_cycle_sync_success": (
        NER,
        "sawtooth's compression cycle with its NER pipeline and entity verifier",
    ),
    "tests/test_compression_core.py::test_run_compression_cycle_sync_fallback": (
        NER,
        "sawtooth's compression cycle with its NER pipeline",
    ),
    "tests/test_compression_core.py::test_run_compression_cycle_async_success": (
        NER,
        "sawtooth's compression cycle with its NER pipeline and entity verifier",
    ),
    # -- salience ------------------------------------------------------------
    "tests/test_salience.py": (SALIENCE, "sawtooth's salience scorer and extractor"),
    "tests/test_ingest_entity_scan.py::test_ingest_scan_captures_salience_entity": (
        SALIENCE,
        "the ingest-time salience scan",
    ),
    # -- DTE folds -----------------------------------------------------------
    "tests/test_dte.py::test_dte_soft_limit_folds_without_compressor_call": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_tool_observation_is_crushed_and_reversible": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_intent_planner_omits_l2_when_ledger_covers_entity_query": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_sync_dte_consolidates_on_pull_with_spend_budget": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_prompt_token_accounting_is_turn_scoped": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_novelty_strips_ledger_values_in_one_pass": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_observation_crush_skips_hash_when_compact_not_smaller": (DTE, _DTE_WHY),
    "tests/test_dte.py::test_dte_hard_truncate_creates_fold_stub": (DTE, _DTE_WHY),
    # -- multi-agent pools ---------------------------------------------------
    "tests/test_multi_agent_pooling.py": (POOLS, "pool_id: shared L1.5 and L2 across agents"),
}


def skip_for(nodeid: str) -> Optional[Tuple[str, str]]:
    """The (category, reason) that exempts the test ``nodeid``, if any."""
    entry = SKIPS.get(nodeid)
    if entry is None:
        entry = SKIPS.get(nodeid.split("::", 1)[0])
    return entry
