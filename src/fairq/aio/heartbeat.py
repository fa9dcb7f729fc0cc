"""Keeping a batch's leases alive from the event loop, and noticing a loop that stops turning.

beat() is a task per claimed batch: every third of a lease it extends each
job's lease; a lost lease marks the job lost and cancels its handler task.
LoopWatch is one thread per running worker that logs when the loop has not
run for longer than a lease: a handler blocked it (time.sleep, blocking I/O,
long CPU work), so no heartbeat could run and leases expired.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..worker.heartbeat import extend_failed
from .job import AsyncJob

log = logging.getLogger("fairq.worker")


async def beat(queue: Any, jobs: Sequence[AsyncJob], lease_seconds: float,
               failures: list[BaseException]) -> None:
    """Extend the jobs' leases every lease_seconds / 3 until cancelled (after the batch's
    settle is decided: a finished job still waits for its batch-mates).

    LeaseLost: the job is lost and its handler cancelled. Busy / Unavailable:
    logged, the next beat tries again. Any other error is appended to
    `failures` (the worker raises it once the batch is settled) and ends the beat.
    """
    while True:
        await asyncio.sleep(lease_seconds / 3)
        for job in jobs:
            if job.lost:
                continue
            try:
                job.lease = await queue.extend(job.lease, lease_seconds)
            except Exception as exc:
                if extend_failed(job, exc, job.lose):
                    failures.append(exc)
                    return


class LoopWatch:
    """A thread that logs "loop.blocked" (once per stall) when the event loop has not run a
    tick for longer than `lease_seconds`; a task on the loop ticks every lease_seconds / 6."""

    def __init__(self, lease_seconds: float) -> None:
        self.lease_seconds = lease_seconds
        self.stalls = 0
        self._last = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fairq-loop-watch", daemon=True)
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the ticker task (on the running loop) and the watching thread."""
        self._last = time.monotonic()
        self._ticker = asyncio.ensure_future(self._tick())
        self._thread.start()

    async def stop(self) -> None:
        """End the thread (at its next check) and the ticker task."""
        self._done.set()
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.wait({self._ticker})

    async def _tick(self) -> None:
        while True:
            self._last = time.monotonic()
            await asyncio.sleep(self.lease_seconds / 6)

    def _watch(self) -> None:
        reported = False
        while not self._done.wait(self.lease_seconds / 6):
            stalled = time.monotonic() - self._last
            if stalled > self.lease_seconds and not reported:
                self.stalls += 1
                log.error("loop.blocked seconds=%.3f lease_seconds=%s: a handler blocks the event loop longer "
                          "than the lease, so leases expire; await instead, or use asyncio.to_thread",
                          stalled, self.lease_seconds)
            reported = stalled > self.lease_seconds
