"""One coroutine handler call: refuse a handler that is not async, run it as a
task under a timeout, and turn what it did into a Decision.

The outcomes are fairq.worker's (decide() reads the finished task): return
is ack, Retry and Fail are theirs, any other exception is a retry. A
handler cancelled because its lease was lost is not decided (nothing of it
is settled); one cancelled past its timeout is a retry with reason "timeout".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import LeaseLost
from ..limits import DEFAULT_MAX_BODY_BYTES
from ..types import Outcome
from ..worker import Job
from ..worker.handler import check_callable, decide
from ..worker.heartbeat import TIMEOUT, log_timeout
from ..worker.job import RELEASE, Decision, handler_timeout

log = logging.getLogger("fairq.worker")

#: The retry reason of a handler task that was cancelled by someone other than the worker.
CANCELLED = "CancelledError"


class AsyncJob(Job):
    """A Job whose handler runs as an asyncio task (`task`); losing its lease cancels the task."""

    __slots__ = ("task",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.task: asyncio.Task[Any] | None = None

    def lose(self, error: LeaseLost) -> None:
        """The lease is gone: mark the job lost and cancel its handler (Job.lost turns True first)."""
        super().lose(error)
        if self.task is not None:
            self.task.cancel()


def check_async_handler(handler: Any) -> Callable[[Job], Awaitable[Any]]:
    """The handler, if it is an async function of one Job; else InvalidInput on "handler"."""
    checked: Callable[[Job], Awaitable[Any]] = check_callable(
        handler, True, " is not an async function: run a plain handler with fairq.Worker",
        "{name} cannot be called with one argument, the Job (async def handle(job): ...)")
    return checked


async def run_handler(handler: Callable[[Job], Awaitable[Any]], job: AsyncJob, timeout: float | None,
                      max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Decision:
    """Run the handler on the job as a task: its decision, retry "timeout" past
    the event's own timeout (Lease.timeout), else past `timeout` (the worker's).

    A job lost before it starts is not run (RELEASE: it will not be settled).
    If this coroutine is cancelled, the handler task is cancelled too.
    """
    if job.lost:
        return RELEASE
    timeout = handler_timeout(job, timeout)
    task = asyncio.ensure_future(handler(job))
    job.task = task
    try:
        await asyncio.wait({task}, timeout=timeout)
        if not task.done():
            log_timeout(job, timeout)
            task.cancel()
            await asyncio.wait({task})  # a handler that swallows the cancel is waited for
            _consume(task)
            return Decision(Outcome.RETRY, TIMEOUT, None)
    except asyncio.CancelledError:
        task.cancel()  # nothing if it has returned already: ended() reads its outcome
        raise
    return _decision(job, task, max_bytes)


def ended(job: AsyncJob, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Decision | None:
    """The decision of a handler that ended by itself (returned or raised), though the
    run_handler() awaiting it was cancelled before it saw so; None if its task was
    cancelled, still runs, or never started."""
    task = job.task
    if task is None or not task.done() or task.cancelled():
        return None
    return _decision(job, task, max_bytes)


def _decision(job: AsyncJob, task: asyncio.Task[Any], max_bytes: int) -> Decision:
    """What the finished handler task says: release if the lease was lost meanwhile."""
    if job.lost:
        _consume(task)
        return RELEASE
    if task.cancelled():
        log.warning("handler.error event_id=%s attempts=%d error=%r", job.event_id, job.attempts, CANCELLED)
        return Decision(Outcome.RETRY, CANCELLED, None)
    return decide(lambda _job: task.result(), job, max_bytes=max_bytes)


def _consume(task: asyncio.Task[Any]) -> None:
    """Read a finished task's exception, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
