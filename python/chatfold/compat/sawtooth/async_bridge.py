"""sawtooth-memory's ``async_bridge``: running one coroutine from sync code."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, TypeVar

__all__ = ["run_coro_once"]

T = TypeVar("T")


def run_coro_once(coro: Coroutine[Any, Any, T]) -> T:
    """Runs ``coro`` to completion on a fresh event loop (``asyncio.run``)."""
    return asyncio.run(coro)
