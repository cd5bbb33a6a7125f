"""sawtooth-memory's ``integrations`` (LangGraph, LangChain): not supported
by chatfold. ``integrations.langgraph`` and ``integrations.langchain_adapter``
import (without langchain installed) and raise
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError` when used."""

from typing import List

__all__: List[str] = []
