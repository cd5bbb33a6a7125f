"""sawtooth-memory's ``integrations.langchain_adapter``: a LangChain chat
message history (``BaseChatMessageHistory``) kept by chatfold.

As sawtooth's (it needs ``langchain-core``): a
:class:`~chatfold.compat.sawtooth.SawtoothSyncWrapper` started on first
use holds the conversation; :attr:`messages` is its compiled prompt (the
system prompt and summary first) as LangChain messages, user and assistant
messages are added as turns, and :meth:`clear` starts a fresh one.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ..config import ContextManagerConfig
from ..sync_wrapper import SawtoothSyncWrapper

__all__ = ["SawtoothChatMessageHistory"]

# The roles a history holds, and their LangChain classes.
_CLASSES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
_ROLES = {"human": "user", "ai": "assistant"}


class SawtoothChatMessageHistory(BaseChatMessageHistory):
    """A chat message history for LCEL runnables and agents, compacted by
    chatfold's tiered memory; thread-safe through its sync wrapper."""

    def __init__(
        self,
        system_prompt: str,
        config: Optional[ContextManagerConfig] = None,
        enable_events: bool = True,
        journal_path: Optional[Path] = None,
    ) -> None:
        self.system_prompt = system_prompt
        self.config = config
        self.enable_events = enable_events
        self.journal_path = journal_path
        self._sync_wrapper: Optional[SawtoothSyncWrapper] = None

    def init_portal(self) -> None:
        """Starts the wrapper, if it is not running."""
        if self._sync_wrapper is None:
            wrapper = SawtoothSyncWrapper(
                system_prompt=self.system_prompt,
                config=self.config,
                enable_events=self.enable_events,
                journal_path=self.journal_path,
            )
            self._sync_wrapper = wrapper.__enter__()

    def close_portal(self) -> None:
        """Stops the wrapper (its journal flushed), if it is running."""
        if self._sync_wrapper is not None:
            self._sync_wrapper.__exit__(None, None, None)
            self._sync_wrapper = None

    def _wrapper(self) -> SawtoothSyncWrapper:
        self.init_portal()
        assert self._sync_wrapper is not None
        return self._sync_wrapper

    @property
    def messages(self) -> List[BaseMessage]:  # type: ignore[override]
        """The compiled prompt's system, user and assistant messages."""
        prompt = self._wrapper().build_prompt()
        return [
            _CLASSES[item["role"]](content=item.get("content", ""))
            for item in prompt
            if item.get("role") in _CLASSES
        ]

    def add_message(self, message: BaseMessage) -> None:
        """Adds a human or AI message as a turn (other kinds are not kept,
        as in sawtooth)."""
        role = _ROLES.get(message.type)
        if role is not None:
            self._wrapper().add_message(role, str(message.content))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Adds each of ``messages``."""
        for message in messages:
            self.add_message(message)

    def clear(self) -> None:
        """Forgets the conversation: a fresh wrapper."""
        self.close_portal()
        self.init_portal()
