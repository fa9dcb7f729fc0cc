"""How a running AsyncWorker's rounds wait: for new work when idle, and out of an outage.

Blocking waits run on one thread of the worker's own (never the loop's
default executor, which the application's asyncio.to_thread, DNS lookups and
run_in_executor(None, ...) need), however many rounds wait: the rounds share
one wait at a time. An idle round joins the queue's wait_for_work in progress
(started by the first round to go idle, for that round's pause) and returns
when it ends or at its own pause's end, whichever is first; rounds that meet
Unavailable share one Outage.recover (log, back off, reconnect). A queue
without wait_for_work (fairq.aio.AsyncClient, or listen=False) is polled:
the pause is a sleep on the loop. No SQL and no queue rule here.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

from ..errors import Unavailable
from ..worker.outage import Outage
from ..worker.verbs import WaitsForWork
from ._thread import DbThread


class Waits:
    """The waits of one AsyncWorker.run(); `stop` (and `wake`, its loop twin) end them."""

    def __init__(self, queue: WaitsForWork | None, outage: Outage, stop: threading.Event,
                 wake: asyncio.Event, name: str = "fairq-wait") -> None:
        self._queue = queue
        self._outage = outage
        self._stop = stop
        self._wake = wake
        self._name = name
        self._thread: DbThread | None = None  # started on the first blocking wait
        self._idle: asyncio.Task[bool] | None = None  # the wait_for_work in progress
        self._listened = False  # what the last wait_for_work to end said
        self._recovery: asyncio.Task[None] | None = None  # the Outage.recover in progress

    async def pause(self, seconds: float) -> bool:
        """An idle round's wait of up to `seconds`, ended early by new work (a queue that
        tells of it) or a stop. True when the shared wait listened for new work."""
        if self._queue is None:
            try:
                await asyncio.wait_for(self._wake.wait(), seconds)
            except asyncio.TimeoutError:
                pass
            return False
        if self._idle is None or self._idle.done():
            self._idle = self._start(functools.partial(self._queue.wait_for_work, seconds, self._stop))
            self._idle.add_done_callback(self._heard)
        idle = self._idle
        await asyncio.wait({idle}, timeout=seconds)
        return idle.result() if idle.done() else self._listened

    async def recover(self, exc: Unavailable, seen: int, pause: float) -> None:
        """After a round begun when `seen` reconnections were made met `exc`: wait `pause`
        seconds and reconnect unless done since (Outage.recover), or join the recovery in
        progress."""
        if self._recovery is None or self._recovery.done():
            self._recovery = self._start(functools.partial(self._outage.recover, exc, seen, self._stop, pause))
        recovery = self._recovery
        await asyncio.wait({recovery})
        recovery.result()

    async def close(self) -> None:
        """Wait for the calls on the thread to end (a stop ends them soon), then let it end."""
        try:
            running = {t for t in (self._idle, self._recovery) if t is not None and not t.done()}
            if running:
                await asyncio.wait(running)
        finally:
            if self._thread is not None:
                self._thread.close()

    def _start(self, fn: Any) -> asyncio.Task[Any]:
        """fn() on the thread, as a task the rounds await; its error is read by them."""
        if self._thread is None:
            self._thread = DbThread(self._name)
        task = asyncio.ensure_future(self._thread.call(fn))
        task.add_done_callback(_retrieved)
        return task

    def _heard(self, idle: asyncio.Task[bool]) -> None:
        if not idle.cancelled() and idle.exception() is None:
            self._listened = idle.result()


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Mark a task's error as read (the rounds that awaited it raised it), so asyncio
    does not log it again when no round was left to await it."""
    if not task.cancelled():
        task.exception()
