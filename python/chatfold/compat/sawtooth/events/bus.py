"""sawtooth-memory's event bus: async handlers subscribed by event type (or
to every event), called in background tasks; a handler's exception is
logged, never raised into the memory."""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Dict, List, Optional, Set

from .types import SawtoothEvent

__all__ = ["EventBus", "EventHandler", "get_event_bus", "reset_event_bus"]

logger = logging.getLogger(__name__)

EventHandler = Callable[[SawtoothEvent], Awaitable[None]]


class EventBus:
    """A minimal async event bus (sawtooth's): ``subscribe(event_type,
    handler)``, ``subscribe_all(handler)``, ``emit``, ``emit_nowait``, ``drain``."""

    def __init__(self) -> None:
        self._handlers: Dict[str, List[EventHandler]] = {}
        self._global_handlers: List[EventHandler] = []
        self._background_tasks: Set["asyncio.Task[None]"] = set()

    def subscribe(self, event_type: str, handler: EventHandler) -> None:
        """Calls ``await handler(event)`` for each event of ``event_type``."""
        self._handlers.setdefault(event_type, []).append(handler)

    def subscribe_all(self, handler: EventHandler) -> None:
        """Calls ``await handler(event)`` for every event."""
        self._global_handlers.append(handler)

    def unsubscribe(self, event_type: str, handler: EventHandler) -> None:
        """Removes ``handler`` from ``event_type`` (nothing if it is not there)."""
        try:
            self._handlers.get(event_type, []).remove(handler)
        except ValueError:
            pass

    def _for(self, event: SawtoothEvent) -> List[EventHandler]:
        return self._global_handlers + self._handlers.get(event.event_type, [])

    async def emit(self, event: SawtoothEvent, fire_and_forget: bool = True) -> None:
        """Calls the event's handlers: in background tasks (the default), or
        awaited together (``fire_and_forget=False``)."""
        handlers = self._for(event)
        if not handlers:
            return
        if fire_and_forget:
            for handler in handlers:
                self._keep(asyncio.ensure_future(self._safe_call(handler, event)))
        else:
            await asyncio.gather(*(self._safe_call(h, event) for h in handlers), return_exceptions=True)

    def emit_nowait(self, event: SawtoothEvent) -> None:
        """:meth:`emit` from sync code, on the running event loop (with no
        loop running, the handlers are not called: they are coroutines)."""
        if not self._for(event):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            logger.debug("no running event loop: %s not delivered", event.event_type)
            return
        self._keep(asyncio.ensure_future(self.emit(event, fire_and_forget=True)))

    def _keep(self, task: "asyncio.Future[None]") -> None:
        self._background_tasks.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._background_tasks.discard)  # type: ignore[arg-type]

    async def drain(self) -> None:
        """Waits until every handler called so far has returned."""
        while self._background_tasks:
            await asyncio.gather(*list(self._background_tasks), return_exceptions=True)

    async def _safe_call(self, handler: EventHandler, event: SawtoothEvent) -> None:
        try:
            await handler(event)
        except Exception as error:
            logger.exception("error in event handler %s: %s", getattr(handler, "__name__", handler), error)


_bus: Optional[EventBus] = None


def get_event_bus() -> EventBus:
    """The process's event bus (made on first use)."""
    global _bus
    if _bus is None:
        _bus = EventBus()
    return _bus


def reset_event_bus() -> None:
    """Forgets the process's event bus (the next :func:`get_event_bus` makes a new one)."""
    global _bus
    _bus = None
