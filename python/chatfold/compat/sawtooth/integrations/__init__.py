"""sawtooth-memory's ``integrations``: ``integrations.langgraph`` (the
LangGraph adapter and graph, with ``langgraph`` installed) and
``integrations.langchain_adapter`` (a LangChain chat message history, with
``langchain-core``), on chatfold's tiered memory. As in sawtooth, importing
either needs its framework; ``chatfold.compat.sawtooth`` itself does not."""

from typing import List

__all__: List[str] = []
