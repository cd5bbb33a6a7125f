"""sawtooth-memory's ``compressor``: not supported by chatfold.

Sawtooth's async compressors (chatfold summarizes through its own backends; configure them with ContextManagerConfig.ollama / .cloud). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's async compressors (chatfold summarizes through its own backends; configure them with ContextManagerConfig.ollama / .cloud)"

__all__ = ["CloudCompressor", "OllamaCompressor"]

CloudCompressor = unsupported_class(__name__, "CloudCompressor", _FEATURE)
OllamaCompressor = unsupported_class(__name__, "OllamaCompressor", _FEATURE)
