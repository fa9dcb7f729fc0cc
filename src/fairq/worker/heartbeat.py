"""The jobs a worker holds, and the one thread that keeps their leases alive
and ends handlers that run past the worker's timeout."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import LeaseLost, StaleLease, TransientError
from ..types import Outcome
from .job import DONE, GONE, RELEASE, RELEASED, RUNNING, TAKEN, WAITING, Decision, Handled, Job
from .verbs import QueueVerbs

log = logging.getLogger("fairq.worker")

#: The retry reason of a handler that ran past the worker's timeout.
TIMEOUT = "timeout"
#: Settles jobs for the heartbeat (the worker's own settle, which counts and logs).
Settle = Callable[[Sequence[Job], Sequence[Decision]], list[Handled]]


def extend_failed(job: Job, exc: BaseException, lose: Callable[[LeaseLost], None]) -> bool:
    """A heartbeat's extend of the job's lease raised `exc`; log it, and True when it is an
    error the worker must raise. LeaseLost: lose(exc) ("heartbeat.lost"). TransientError:
    the lease still runs, the next beat tries again ("heartbeat.busy"). Else "heartbeat.error"."""
    if isinstance(exc, LeaseLost):
        lose(exc)
        log.warning("heartbeat.lost event_id=%s error=%r", job.event_id, str(exc))
        return False
    if isinstance(exc, TransientError):
        log.warning("heartbeat.busy event_id=%s error=%r", job.event_id, f"{type(exc).__name__}: {exc}")
        return False
    log.error("heartbeat.error event_id=%s error=%r", job.event_id, f"{type(exc).__name__}: {exc}")
    return True


def log_timeout(job: Job, timeout: float | None) -> None:
    """Log a handler given up past the worker's timeout."""
    log.warning("handler.timeout event_id=%s attempts=%d timeout=%s", job.event_id, job.attempts, timeout)


class Heartbeat:
    """The jobs a worker holds, and one background thread that extends their
    leases every third of a lease while any is held.

    A held job is waiting (claimed, not started), running, done (decided,
    not yet settled) or released (the worker gives it back unused). begin()
    and take_unstarted() move a waiting job under one lock, so a job is
    either started by its thread or given back by run(), never both.

    With a timeout, a handler still running `timeout` seconds after it began
    is given up: its whole batch is taken back and settled at once through
    `settle` (the late job as retry "timeout", finished ones with their
    decisions, unstarted ones released), the job is marked lost, and
    `on_timeout` runs (a worker process exits there and is replaced).
    sleep(seconds) is how the thread waits between rounds (tests drive it:
    then every round extends).
    """

    def __init__(self, queue: QueueVerbs, lease_seconds: float, sleep: Callable[[float], Any] | None = None,
                 *, timeout: float | None = None, settle: Settle | None = None,
                 on_timeout: Callable[[], Any] | None = None) -> None:
        self._queue = queue
        self._seconds = lease_seconds
        self._driven = sleep is not None
        self._wake = threading.Event()
        self._sleep = sleep if sleep is not None else self._wait
        self.timeout = timeout
        self.settle = settle
        self.on_timeout = on_timeout
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when a timeout's settle is over
        self._held: dict[int, Job] = {}
        self._thread: threading.Thread | None = None

    def hold(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            self._held.update((id(job), job) for job in jobs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="fairq-heartbeat", daemon=True)
                self._thread.start()

    def begin(self, job: Job, *, first: bool) -> str:
        """The job's next phase: running, or released if the worker is stopping
        and it is not the first of its batch; "gone" if it was taken back."""
        with self._lock:
            if self._held.get(id(job)) is not job:
                return GONE
            job._phase = RELEASED if job.stopping and not first else RUNNING
            if job._phase == RUNNING and self.timeout is not None:
                job._deadline = time.monotonic() + self.timeout
                self._wake.set()  # the beat thread may be asleep past this deadline
            return job._phase

    def done(self, job: Job, decision: Decision) -> None:
        """The job's handler decided; a job a timeout took back keeps the timeout's settle."""
        with self._lock:
            if job._phase == RUNNING and self._held.get(id(job)) is job:
                job._phase = DONE
                job._decision = decision

    def drop(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._held.pop(id(job), None)

    def take_unstarted(self) -> list[Job]:
        """Stop holding the waiting jobs and return them, for run() to release."""
        with self._lock:
            waiting = [job for job in self._held.values() if job._phase == WAITING]
            for job in waiting:
                del self._held[id(job)]
            return waiting

    def wait_settled(self, jobs: Sequence[Job]) -> None:
        """Wait until no job here is being settled by a timeout (the settle is one queue call)."""
        with self._settled:
            self._settled.wait_for(lambda: all(job._phase != TAKEN for job in jobs))

    def running(self) -> int:
        """Held jobs whose handler runs now."""
        with self._lock:
            return sum(job._phase == RUNNING for job in self._held.values())

    def _holding(self, job: Job) -> bool:
        with self._lock:
            return self._held.get(id(job)) is job

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)

    def _beat(self) -> None:
        next_extend = time.monotonic() + self._seconds / 3
        while True:
            self._wake.clear()
            with self._lock:
                deadlines = [j._deadline for j in self._held.values() if j._phase == RUNNING and j._deadline]
            self._sleep(max(0.0, min([next_extend, *deadlines]) - time.monotonic()))
            with self._lock:
                jobs = list(self._held.values())
                if not jobs:
                    self._thread = None
                    return
            now = time.monotonic()
            self._end_late(now)
            if self._driven or now >= next_extend:
                self._extend(jobs)
                next_extend = time.monotonic() + self._seconds / 3

    def _extend(self, jobs: list[Job]) -> None:
        for job in jobs:
            if job.lost or job._failure is not None or not self._holding(job):
                continue
            try:
                job.lease = self._queue.extend(job.lease, self._seconds)
            except BaseException as exc:
                if isinstance(exc, LeaseLost) and not self._holding(job):
                    continue  # it was settled meanwhile: nothing was lost
                if extend_failed(job, exc, job._lose):
                    job._failure = exc  # raised by the job's step() once its batch is settled

    def _end_late(self, now: float) -> None:
        """Take back and settle the batch of every handler past its deadline."""
        if self.timeout is None or self.settle is None:
            return
        with self._lock:
            late = [j for j in self._held.values() if j._phase == RUNNING and j._deadline and j._deadline <= now]
            batches: list[tuple[list[Job], list[Decision], list[Job]]] = []
            for job in late:
                if self._held.get(id(job)) is not job:
                    continue  # taken with an earlier late job of its batch
                taken: list[Job] = []
                decisions: list[Decision] = []
                for other in job._batch:
                    if self._held.pop(id(other), None) is None:
                        continue
                    if other._phase == RUNNING:
                        decisions.append((Outcome.RETRY, TIMEOUT, None))
                    elif other._phase == DONE and other._decision is not None:
                        decisions.append(other._decision)
                    else:
                        decisions.append(RELEASE)
                    taken.append(other)
                batches.append((taken, decisions, [j for j in taken if j._phase == RUNNING]))
                for other in taken:
                    other._phase = TAKEN
        for taken, decisions, running in batches:
            for job in running:
                log_timeout(job, self.timeout)
            try:
                handled = self.settle(taken, decisions)
            except BaseException as exc:  # a queue error: raised by the batch's step()
                log.error("heartbeat.error error=%r", f"{type(exc).__name__}: {exc}")
                handled = []
                for job in taken:
                    job._failure = exc
            for job in running:  # its handler runs on; what it returns is not settled
                job._lose(StaleLease(job.event_id, job.lease.generation,
                                     f"{job.event_id}: the handler ran past its {self.timeout} s timeout"))
            if self.on_timeout is not None:
                # Before any waiting thread wakes: a worker process exits here,
                # and must not claim a new batch it would strand.
                self.on_timeout()
            with self._settled:
                for job, result in zip(taken, handled):
                    job._handled = result
                for job in taken:
                    job._phase = GONE
                self._settled.notify_all()
