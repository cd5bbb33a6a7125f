"""sawtooth-memory's LangGraph integration (it needs ``langgraph``): the
adapter between LangChain messages and a context manager, and the graph
that compacts before each model call."""

from .adapter import SawtoothLangGraphAdapter
from .graph import AgentState, build_sawtooth_graph, make_compression_node, make_llm_node

__all__ = ["SawtoothLangGraphAdapter", "AgentState", "build_sawtooth_graph", "make_compression_node", "make_llm_node"]
