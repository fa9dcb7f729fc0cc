"""The jobs a worker holds, and the one thread that keeps their leases alive
and ends handlers that run past the worker's timeout.

Where a held job stands (waiting, running, done, released, taken by a
timeout, gone) is recorded here, in a HeldJob record the heartbeat alone reads
and writes, under its lock; the Job itself only carries its lease and loss."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import LeaseLost, StaleLease, TransientError
from ..types import Outcome
from .job import RELEASE, Decision, Handled, Job, handler_timeout
from .verbs import QueueVerbs

log = logging.getLogger("fairq.worker")

#: The retry reason of a handler that ran past the worker's timeout.
TIMEOUT = "timeout"
#: A held job's phases. GONE: run() or a timeout took it back; TAKEN: a timeout took its batch and settles it.
WAITING, RUNNING, DONE, RELEASED, GONE, TAKEN = "waiting", "running", "done", "released", "gone", "taken"
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


class HeldJob:
    """The heartbeat's record of one held job: only the Heartbeat reads or writes it, under its lock
    (the beat thread, which alone writes `failure`, also reads that without)."""

    __slots__ = ("job", "batch", "phase", "deadline", "decision", "handled", "failure")

    def __init__(self, job: Job, batch: list[HeldJob]) -> None:
        self.job = job
        self.batch = batch  # the records of the jobs claimed with this one, this one included
        self.phase = WAITING
        self.deadline: float | None = None  # monotonic time its handler times out
        self.decision: Decision | None = None  # the handler's once it is done, or RELEASE
        self.handled: Handled | None = None  # set when a timeout settled the job's batch
        self.failure: BaseException | None = None  # a heartbeat error that is not transient


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
        self._held: dict[int, HeldJob] = {}
        self._thread: threading.Thread | None = None

    def hold(self, jobs: Sequence[Job]) -> list[HeldJob]:
        """Hold a claimed batch (its leases are extended from now on); its records, in order."""
        batch: list[HeldJob] = []
        batch.extend(HeldJob(job, batch) for job in jobs)
        with self._lock:
            self._held.update((id(held.job), held) for held in batch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="fairq-heartbeat", daemon=True)
                self._thread.start()
        return batch

    def begin(self, held: HeldJob, *, first: bool) -> bool:
        """True when the job's handler is to run now; False if the worker is stopping and it is
        not the first of its batch (released), or it was taken back (gone)."""
        with self._lock:
            if self._held.get(id(held.job)) is not held:
                return False
            if held.job.stopping and not first:
                held.phase, held.decision = RELEASED, RELEASE
                return False
            held.phase = RUNNING
            limit = handler_timeout(held.job, self.timeout)
            if limit is not None:
                held.deadline = time.monotonic() + limit
                self._wake.set()  # the beat thread may be asleep past this deadline
            return True

    def done(self, held: HeldJob, decision: Decision) -> None:
        """The job's handler decided; a job a timeout took back keeps the timeout's settle."""
        with self._lock:
            if held.phase == RUNNING and self._held.get(id(held.job)) is held:
                held.phase = DONE
                held.decision = decision

    def drop(self, batch: Sequence[HeldJob]) -> None:
        """Stop holding the batch (its leases are no longer extended)."""
        with self._lock:
            for held in batch:
                if self._held.get(id(held.job)) is held:
                    del self._held[id(held.job)]

    def finish(self, batch: Sequence[HeldJob]) -> tuple[list[Job], list[Decision], dict[int, Handled]]:
        """Once no timeout is settling the batch (the settle is one queue call): the jobs the
        worker settles and their decisions, and what a timeout settled, by id(job)."""
        with self._settled:
            self._settled.wait_for(lambda: all(held.phase != TAKEN for held in batch))
            mine = [held for held in batch if held.phase != GONE and held.decision is not None]
            return ([held.job for held in mine], [held.decision for held in mine if held.decision is not None],
                    {id(held.job): held.handled for held in batch if held.handled is not None})

    def failure(self, batch: Sequence[HeldJob]) -> BaseException | None:
        """The first heartbeat error met on the batch, asked after the worker's own settle
        (an extend running meanwhile may end in one): the worker raises it then."""
        with self._lock:
            return next((held.failure for held in batch if held.failure is not None), None)

    def take_unstarted(self) -> list[Job]:
        """Stop holding the waiting jobs and return them, for run() to release."""
        with self._lock:
            waiting = [held for held in self._held.values() if held.phase == WAITING]
            for held in waiting:
                del self._held[id(held.job)]
            return [held.job for held in waiting]

    def running(self) -> int:
        """HeldJob jobs whose handler runs now."""
        with self._lock:
            return sum(held.phase == RUNNING for held in self._held.values())

    def _holding(self, held: HeldJob) -> bool:
        with self._lock:
            return self._held.get(id(held.job)) is held

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)

    def _beat(self) -> None:
        next_extend = time.monotonic() + self._seconds / 3
        while True:
            self._wake.clear()
            with self._lock:
                deadlines = [h.deadline for h in self._held.values() if h.phase == RUNNING and h.deadline]
            self._sleep(max(0.0, min([next_extend, *deadlines]) - time.monotonic()))
            with self._lock:
                held = list(self._held.values())
                if not held:
                    self._thread = None
                    return
            now = time.monotonic()
            self._end_late(now)
            if self._driven or now >= next_extend:
                self._extend(held)
                next_extend = time.monotonic() + self._seconds / 3

    def _extend(self, records: list[HeldJob]) -> None:
        for held in records:
            job = held.job
            if job.lost or held.failure is not None or not self._holding(held):
                continue
            try:
                job.lease = self._queue.extend(job.lease, self._seconds)
            except BaseException as exc:
                if isinstance(exc, LeaseLost) and not self._holding(held):
                    continue  # it was settled meanwhile: nothing was lost
                if extend_failed(job, exc, job.lose):
                    with self._lock:
                        held.failure = exc  # raised by the job's step() once its batch is settled

    def _end_late(self, now: float) -> None:
        """Take back and settle the batch of every handler past its deadline."""
        if self.settle is None:
            return
        with self._lock:
            late = [h for h in self._held.values() if h.phase == RUNNING and h.deadline and h.deadline <= now]
            batches: list[tuple[list[HeldJob], list[Decision], list[Job]]] = []
            for held in late:
                if self._held.get(id(held.job)) is not held:
                    continue  # taken with an earlier late job of its batch
                taken: list[HeldJob] = []
                decisions: list[Decision] = []
                for other in held.batch:
                    if self._held.pop(id(other.job), None) is None:
                        continue
                    if other.phase == RUNNING:
                        decisions.append(Decision(Outcome.RETRY, TIMEOUT, None))
                    elif other.phase == DONE and other.decision is not None:
                        decisions.append(other.decision)
                    else:
                        decisions.append(RELEASE)
                    taken.append(other)
                batches.append((taken, decisions, [h.job for h in taken if h.phase == RUNNING]))
                for other in taken:
                    other.phase = TAKEN
        for taken, decisions, running in batches:
            for job in running:
                log_timeout(job, handler_timeout(job, self.timeout))
            try:
                handled = self.settle([h.job for h in taken], decisions)
            except BaseException as exc:  # a queue error: raised by the batch's step()
                log.error("heartbeat.error error=%r", f"{type(exc).__name__}: {exc}")
                handled = []
                with self._lock:
                    for other in taken:
                        other.failure = exc
            for job in running:  # its handler runs on; what it returns is not settled
                job.lose(StaleLease(job.event_id, job.lease.generation,
                                    f"{job.event_id}: the handler ran past its "
                                    f"{handler_timeout(job, self.timeout)} s timeout"))
            if self.on_timeout is not None:
                # Before any waiting thread wakes: a worker process exits here,
                # and must not claim a new batch it would strand.
                self.on_timeout()
            with self._settled:
                for other, result in zip(taken, handled):
                    other.handled = result
                for other in taken:
                    other.phase = GONE
                self._settled.notify_all()
