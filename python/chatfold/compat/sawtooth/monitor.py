"""sawtooth-memory's ``monitor``: not supported by chatfold.

Sawtooth's TokenMonitor (chatfold counts tokens in its core: chatfold.count_tokens). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's TokenMonitor (chatfold counts tokens in its core: chatfold.count_tokens)"

__all__ = ["TokenMonitor"]

TokenMonitor = unsupported_class(__name__, "TokenMonitor", _FEATURE)
