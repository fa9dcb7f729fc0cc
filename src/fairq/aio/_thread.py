"""A dedicated thread of fairq's own (one per queue, one per running AsyncWorker's
waits), how a coroutine waits for a call on it, and how it completes work it must not drop.

DbThread runs blocking calls on threads of its own (one by default; never
the loop's default executor), each in a copy of the caller's contextvars. A
call that has started cannot be stopped: if the awaiting task is cancelled,
the call still runs to its end, `on_cancel(result)` gives back what it took
(a claim's leases), and only then is CancelledError raised. A call still
waiting for the thread is dropped at once. No queue verbs here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

R = TypeVar("R")


class DbThread:
    """An executor of `threads` threads (default one) named `name`; call() runs a blocking function on it."""

    def __init__(self, name: str, threads: int = 1) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    async def call(self, fn: Callable[[], R], on_cancel: Callable[[R], Awaitable[Any]] | None = None) -> R:
        """fn() on the thread, in a copy of this task's contextvars.

        Cancelled while waiting for the thread: dropped, never run. Cancelled
        once it runs: it completes, `on_cancel(result)` runs (uninterrupted),
        then CancelledError is raised.
        """
        context = contextvars.copy_context()
        future = self._executor.submit(context.run, fn)
        waiting = asyncio.wrap_future(future)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            if future.cancel():  # not started: nothing happened
                raise
            try:
                result = await finish(waiting)
            except Exception:  # the call failed: it took nothing to give back
                raise asyncio.CancelledError() from None
            if on_cancel is not None:
                await finish(asyncio.ensure_future(on_cancel(result)))
            raise

    def close(self) -> None:
        """Let the thread end once its calls are done (does not wait)."""
        self._executor.shutdown(wait=False)


async def finish(waiting: asyncio.Future[R]) -> R:
    """Wait for `waiting` to end even if this task is cancelled meanwhile; the
    caller is already handling a cancellation and re-raises it afterwards."""
    while True:
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            if waiting.cancelled():
                raise


async def completing(work: Awaitable[R]) -> R:
    """Await `work` to its end even if this task is cancelled meanwhile (a settle
    that must be written); a cancellation that came meanwhile is raised after it."""
    future = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await finish(future)
        raise
