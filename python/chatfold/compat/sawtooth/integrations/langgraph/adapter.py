"""sawtooth-memory's ``integrations.langgraph.adapter``: not supported by chatfold.

The LangGraph integration. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ..._unsupported import unsupported_class, unsupported_function

_FEATURE = "the LangGraph integration"

__all__ = ["SawtoothLangGraphAdapter"]

SawtoothLangGraphAdapter = unsupported_class(__name__, "SawtoothLangGraphAdapter", _FEATURE)
