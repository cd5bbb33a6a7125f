"""sawtooth-memory's ``integrations.langchain_adapter``: not supported by chatfold.

The LangChain integration. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from .._unsupported import unsupported_class, unsupported_function

_FEATURE = "the LangChain integration"

__all__ = ["SawtoothChatMessageHistory"]

SawtoothChatMessageHistory = unsupported_class(__name__, "SawtoothChatMessageHistory", _FEATURE)
