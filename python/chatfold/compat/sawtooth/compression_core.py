"""sawtooth-memory's ``compression_core``: not supported by chatfold.

Sawtooth's LLM compression pipeline (chatfold folds in its Rust core). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's LLM compression pipeline (chatfold folds in its Rust core)"

__all__ = ["AsyncCompressor", "CompressionCycleInput", "CompressionCycleOutcome", "CompressionEngineConfig", "SyncCompressor", "estimate_tokens", "fallback_merge_into_state", "merge_compression_into_state", "messages_to_text", "run_compression_cycle_async", "run_compression_cycle_sync"]

AsyncCompressor = unsupported_class(__name__, "AsyncCompressor", _FEATURE)
CompressionCycleInput = unsupported_class(__name__, "CompressionCycleInput", _FEATURE)
CompressionCycleOutcome = unsupported_class(__name__, "CompressionCycleOutcome", _FEATURE)
CompressionEngineConfig = unsupported_class(__name__, "CompressionEngineConfig", _FEATURE)
SyncCompressor = unsupported_class(__name__, "SyncCompressor", _FEATURE)
estimate_tokens = unsupported_function(__name__, "estimate_tokens", _FEATURE)
fallback_merge_into_state = unsupported_function(__name__, "fallback_merge_into_state", _FEATURE)
merge_compression_into_state = unsupported_function(__name__, "merge_compression_into_state", _FEATURE)
messages_to_text = unsupported_function(__name__, "messages_to_text", _FEATURE)
run_compression_cycle_async = unsupported_function(__name__, "run_compression_cycle_async", _FEATURE)
run_compression_cycle_sync = unsupported_function(__name__, "run_compression_cycle_sync", _FEATURE)
