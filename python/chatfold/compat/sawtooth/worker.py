"""sawtooth-memory's ``worker``: not supported by chatfold.

Sawtooth's CompressionWorker (chatfold's worker is the tiered memory's asyncio task). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's CompressionWorker (chatfold's worker is the tiered memory's asyncio task)"

__all__ = ["CompressionTask", "CompressionWorker"]

CompressionTask = unsupported_class(__name__, "CompressionTask", _FEATURE)
CompressionWorker = unsupported_class(__name__, "CompressionWorker", _FEATURE)
