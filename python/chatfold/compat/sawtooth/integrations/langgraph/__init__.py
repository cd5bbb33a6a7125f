"""sawtooth-memory's LangGraph integration: not supported by chatfold; the
names import and raise
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError` when used."""

from .adapter import SawtoothLangGraphAdapter
from .graph import AgentState, build_sawtooth_graph, make_compression_node, make_llm_node

__all__ = ["SawtoothLangGraphAdapter", "AgentState", "build_sawtooth_graph", "make_compression_node", "make_llm_node"]
