"""sawtooth-memory's ``sync_compressor``: not supported by chatfold.

Sawtooth's sync compressors (chatfold summarizes through its own backends; configure them with ContextManagerConfig.ollama / .cloud). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's sync compressors (chatfold summarizes through its own backends; configure them with ContextManagerConfig.ollama / .cloud)"

__all__ = ["SyncCloudCompressor", "SyncOllamaCompressor"]

SyncCloudCompressor = unsupported_class(__name__, "SyncCloudCompressor", _FEATURE)
SyncOllamaCompressor = unsupported_class(__name__, "SyncOllamaCompressor", _FEATURE)
