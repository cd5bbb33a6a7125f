"""sawtooth-memory's ``integrations.langgraph.graph``: not supported by chatfold.

The LangGraph integration. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ..._unsupported import unsupported_class, unsupported_function

_FEATURE = "the LangGraph integration"

__all__ = ["AgentState", "build_sawtooth_graph", "make_compression_node", "make_llm_node"]

AgentState = unsupported_class(__name__, "AgentState", _FEATURE)
build_sawtooth_graph = unsupported_function(__name__, "build_sawtooth_graph", _FEATURE)
make_compression_node = unsupported_function(__name__, "make_compression_node", _FEATURE)
make_llm_node = unsupported_function(__name__, "make_llm_node", _FEATURE)
