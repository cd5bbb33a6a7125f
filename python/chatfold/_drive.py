"""Driving a Rust operation that waits on a summarizer: the operation runs
in Rust until a fold needs its summary; Python calls (and awaits) the
summarizer, hands the answer back, and the operation completes the fold."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

from . import _chatfold


_BLOCKING = (_chatfold.OpenAISummarizer, _chatfold.AnthropicSummarizer)


async def drive(step: Any, summarize: Callable[[Any], Any]) -> Any:
    """Runs ``step`` to its end, answering each request with ``summarize``
    (a function or a coroutine function). A summarizer's exception fails the
    fold (nothing changed) and is raised as itself; a cancellation abandons
    the fold, the state as it was. A summarizer with an ``asummarize``
    coroutine method (a framework's model, say) is awaited through it."""
    asummarize = getattr(summarize, "asummarize", None)
    while True:
        request = step.poll()
        if request is None:
            if step.done():
                return step.result()
            # Waiting on another fold in flight (the tiered worker's).
            await asyncio.sleep(0.001)
            continue
        try:
            if isinstance(summarize, _BLOCKING):
                # An HTTP summarizer of chatfold's: blocking, off the event loop.
                answer = await asyncio.get_running_loop().run_in_executor(None, summarize, request)
            elif asummarize is not None:
                answer = asummarize(request)
            else:
                answer = summarize(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as error:  # the fold fails; result() raises it
            step.fail(error)
        except BaseException:  # cancelled, interrupted: abandon the fold
            step.cancel()
            raise
        else:
            step.answer(answer)
