"""The worker loop: claim, run a handler, settle; heartbeats and graceful stop.

A handler is a function of one Job. Returning settles its event as ack;
raising Retry(reason, delay=None) or Fail(reason) settles it as retry or
fail; any other exception is a retry whose reason is the exception's type and
message. The try/except wraps only the handler: whatever the queue itself
raises (Busy, a database error) propagates out of step() and run() and is
never turned into a retry. While handlers run, a heartbeat thread extends
their leases; a lease it finds lost is reported to the handler (Job.lost) and
its event is not settled. Concurrency is threads sharing one Queue, or
processes (fairq._processes) each opening their own. The queue may also be a
fairq.Client: the worker calls only verbs the Client serves alike
(claim_many, settle_many, extend). No SQL, no policy here.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import _validate as v
from .errors import InvalidInput, LeaseLost
from .http.client import Client
from .queue import MAX_BATCH, Queue
from .types import Lease, Outcome, Settled, State

__all__ = ["Worker", "Job", "Handled", "Retry", "Fail"]

log = logging.getLogger("fairq")

#: What a worker counts; Worker.counts() and run() return these keys.
COUNTS = ("claimed", "acked", "retried", "quarantined", "lost", "abandoned")
_COUNT_FOR = {State.ACKED: "acked", State.READY: "retried", State.QUARANTINED: "quarantined"}
STOPPED_UNHANDLED = "the worker stopped before handling it"


class Retry(Exception):
    """Raised by a handler: settle the event as retry, after `delay` seconds
    (None: the queue's backoff). Past the retry budget it is quarantined."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        self.reason = v.reason(reason, "reason", required=True)
        self.delay = v.optional_seconds(delay, "delay")
        super().__init__(self.reason)


class Fail(Exception):
    """Raised by a handler: quarantine the event now, with `reason`; it blocks its flow until a redrive."""

    def __init__(self, reason: str) -> None:
        self.reason = v.reason(reason, "reason", required=True)
        super().__init__(self.reason)


class Job:
    """One claimed event in a handler's hands.

    `lease` is the Lease (the heartbeat keeps its lease_until current);
    event_id, flow, seq, body and attempts are read from it. `lost` turns
    True when a heartbeat finds the lease gone (it expired and the event was
    claimed again, or it was settled elsewhere): the event belongs to someone
    else now, and this handler's result will not be settled. A long handler
    checks `lost` (or calls check()) between steps and gives up early.
    `stopping` turns True when the worker is asked to stop: finish soon.
    """

    __slots__ = ("lease", "_stop", "_lost")

    def __init__(self, lease: Lease, stop: threading.Event) -> None:
        self.lease = lease
        self._stop = stop
        self._lost: LeaseLost | None = None

    @property
    def event_id(self) -> str:
        """The event's id."""
        return self.lease.event_id

    @property
    def flow(self) -> str | None:
        """The event's flow (None: a flow of its own)."""
        return self.lease.flow

    @property
    def seq(self) -> int:
        """The event's position in its flow."""
        return self.lease.seq

    @property
    def body(self) -> Any:
        """The event's JSON body."""
        return self.lease.body

    @property
    def attempts(self) -> int:
        """Claims of the event in this round, this one included."""
        return self.lease.attempts

    @property
    def lost(self) -> bool:
        """True once a heartbeat found the lease lost; the result will not be settled."""
        return self._lost is not None

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to stop."""
        return self._stop.is_set()

    def check(self) -> None:
        """Raise the StaleLease or LeaseExpired a heartbeat met, if any."""
        if self._lost is not None:
            raise self._lost

    def _lose(self, error: LeaseLost) -> None:
        self._lost = error


@dataclass(frozen=True)
class Handled:
    """What a worker did with one claimed event.

    outcome and reason: the handler's decision. settled: the state the
    settle left the event in; None when the lease was lost first (`lost`
    says how) and nothing was written.
    """

    event_id: str
    outcome: Outcome
    reason: str | None
    settled: Settled | None
    lost: LeaseLost | None = None


class Worker:
    """Runs a handler on claimed events: step() does one round, run() loops.

    queue: a Queue, or a Client of a `fairq serve`. handler(job) returns
    (ack) or raises Retry, Fail or anything else (retry). owner labels leases (default host:pid). concurrency: handler
    threads sharing the queue, or with processes=True, processes each
    opening the file again (the handler must then be importable by name;
    process_init() runs first in each). batch > 1: each round claims up to
    `batch` events with claim_many (at most one per flow) and settles them
    with one settle_many. lease_seconds: each claim's lease (default the
    queue's); a heartbeat extends it every third of it while the handler
    runs. stop_timeout: seconds running handlers get to finish after a stop;
    those still running then are abandoned and their leases expire.
    idle_min, idle_max: an idle worker polls after idle_min seconds,
    doubling up to idle_max.
    """

    def __init__(
        self, queue: Queue | Client, handler: Callable[[Job], Any], *, owner: str | None = None,
        concurrency: int = 1, batch: int = 1, processes: bool = False,
        lease_seconds: float | None = None, stop_timeout: float = 30.0, idle_min: float = 0.01,
        idle_max: float = 1.0, process_init: Callable[[], Any] | None = None,
    ) -> None:
        if not isinstance(queue, (Queue, Client)):
            raise InvalidInput("queue", f"must be a fairq.Queue or fairq.Client, not {type(queue).__name__}")
        if not callable(handler):
            raise InvalidInput("handler", "must be callable")
        if not isinstance(processes, bool):
            raise InvalidInput("processes", "must be True or False")
        self.queue = queue
        self.handler = handler
        self.owner = v.optional_identifier(owner, "owner") or default_owner()
        self.concurrency = v.count(concurrency, "concurrency", low=1, high=1024)
        self.batch = v.count(batch, "batch", low=1, high=MAX_BATCH)
        self.processes = processes
        self.lease_seconds = queue.lease_seconds if lease_seconds is None else v.seconds(
            lease_seconds, "lease_seconds", positive=True)
        self.stop_timeout = v.seconds(stop_timeout, "stop_timeout")
        self.idle_min = v.seconds(idle_min, "idle_min", positive=True)
        self.idle_max = v.seconds(idle_max, "idle_max")
        if self.idle_max < self.idle_min:
            raise InvalidInput("idle_max", f"must be >= idle_min ({self.idle_min}), got {self.idle_max}")
        if process_init is not None and not callable(process_init):
            raise InvalidInput("process_init", "must be callable")
        self.process_init = process_init
        self._owner_arg = owner
        self._stop = threading.Event()
        self._heartbeat = _Heartbeat(queue, self.lease_seconds)
        self._lock = threading.Lock()
        self._active = 0  # threads inside step(): until_idle waits for all of them
        self._error: BaseException | None = None
        if processes:
            for name, value in (("handler", handler), ("process_init", process_init)):
                _check_picklable(name, value)
            from ._processes import shared_counts

            self._tally = _Tally(shared_counts(len(COUNTS)))
        else:
            self._tally = _Tally()

    # -- one round -------------------------------------------------------------

    def step(self) -> list[Handled]:
        """Claim up to `batch` events, run the handler on each, settle them.

        Returns what happened to each event, in claim order; [] when nothing
        was claimable. Errors of the queue itself propagate.
        """
        leases = self.queue.claim_many(self.batch, owner=self.owner, lease_seconds=self.lease_seconds)
        if not leases:
            return []
        self._tally.add("claimed", len(leases))
        jobs = [Job(lease, self._stop) for lease in leases]
        self._heartbeat.hold(jobs)
        try:
            decisions = [self._decide(job, later_in_batch=i > 0) for i, job in enumerate(jobs)]
        finally:
            self._heartbeat.release(jobs)
        self._heartbeat.raise_failure()
        return self._settle(jobs, decisions)

    def _decide(self, job: Job, *, later_in_batch: bool) -> tuple[Outcome, str | None, float | None]:
        """Run the handler on one job: (outcome, reason, delay) for its settle."""
        if later_in_batch and self._stop.is_set():
            return Outcome.RETRY, STOPPED_UNHANDLED, 0.0  # back to ready at once, for another worker
        try:
            self.handler(job)
        except Retry as decision:
            return Outcome.RETRY, decision.reason, decision.delay
        except Fail as decision:
            return Outcome.FAIL, decision.reason, None
        except Exception as exc:
            reason = describe(exc)
            if not job.lost:  # giving up on a lost lease (job.check()) is no handler error
                log.warning("handler.error event_id=%s attempts=%d error=%r", job.event_id, job.attempts,
                            reason, exc_info=log.isEnabledFor(logging.DEBUG))
            return Outcome.RETRY, reason, None
        return Outcome.ACK, None, None

    def _settle(self, jobs: Sequence[Job], decisions: Sequence[tuple[Outcome, str | None, float | None]],
                ) -> list[Handled]:
        """Settle every job whose lease the heartbeat did not find lost, in one transaction."""
        out: list[Handled | None] = [None] * len(jobs)
        items, slots = [], []
        for i, (job, (outcome, reason, delay)) in enumerate(zip(jobs, decisions)):
            if job._lost is not None:
                out[i] = Handled(job.event_id, outcome, reason, None, job._lost)
            else:
                items.append((job.lease, outcome, reason, delay))
                slots.append(i)
        results = self.queue.settle_many(items) if items else []
        for i, result in zip(slots, results):
            outcome, reason, _ = decisions[i]
            if isinstance(result, LeaseLost):
                out[i] = Handled(jobs[i].event_id, outcome, reason, None, result)
            else:
                out[i] = Handled(jobs[i].event_id, outcome, reason, result)
        handled = [h for h in out if h is not None]
        for h in handled:
            if h.settled is None:
                self._tally.add("lost")
                log.warning("lease.lost event_id=%s outcome=%s not settled: %s", h.event_id, h.outcome, h.lost)
            else:
                self._tally.add(_COUNT_FOR[h.settled.state])
                log.debug("settled event_id=%s outcome=%s state=%s", h.event_id, h.outcome, h.settled.state)
        return handled

    # -- the loop ----------------------------------------------------------------

    def run(self, until_idle: bool = False, *, signals: bool = True) -> dict[str, int]:
        """Handle events until stopped (or, with until_idle, until nothing is
        claimable and no handler runs); returns counts().

        signals=True (and called from the main thread): the first SIGTERM or
        SIGINT stops claiming and gives running handlers `stop_timeout` seconds to
        finish and be settled; a second one exits the process at once
        (status 128 + signal; its leases expire and others take over).
        Raises the first error the queue raised in any thread or process.
        """
        if self.processes:
            from ._processes import run_processes

            return run_processes(self, until_idle, signals=signals)
        with StopSignals((signal.SIGTERM, signal.SIGINT) if signals else ()) as received:
            return self._run_threads(until_idle, received)

    def _run_threads(self, until_idle: bool, received: StopSignals) -> dict[str, int]:
        """run() with `concurrency` threads in this process; `received` tells of stop signals."""
        self._stop.clear()
        self._error = None
        threads = [threading.Thread(target=self._loop, args=(until_idle,), name=f"fairq-worker-{i}",
                                    daemon=True) for i in range(self.concurrency)]
        log.info("worker.start owner=%s concurrency=%d batch=%d lease_seconds=%s until_idle=%s",
                 self.owner, self.concurrency, self.batch, self.lease_seconds, until_idle)
        for thread in threads:
            thread.start()
        while not self._stop.wait(0.05):
            if received.signum is not None:
                log.info("worker.stopping signal=%s stop_timeout=%s", signal.Signals(received.signum).name,
                         self.stop_timeout)
                self.stop()
        deadline = time.monotonic() + self.stop_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        abandoned = self._heartbeat.held()
        if abandoned:
            self._tally.add("abandoned", abandoned)
            log.warning("worker.abandoned handlers=%d stop_timeout=%s their leases will expire", abandoned,
                        self.stop_timeout)
        counts = self.counts()
        log.info("worker.stop %s", " ".join(f"{k}={n}" for k, n in counts.items()))
        if self._error is not None:
            raise self._error
        return counts

    def _loop(self, until_idle: bool) -> None:
        pause = self.idle_min
        try:
            while not self._stop.is_set():
                with self._lock:
                    self._active += 1
                handled: list[Handled] = []
                try:
                    handled = self.step()
                finally:
                    with self._lock:
                        self._active -= 1
                        idle = not handled and self._active == 0
                if handled:
                    pause = self.idle_min
                elif until_idle and idle:
                    self._stop.set()
                else:
                    self._stop.wait(pause)  # monotonic; a stop wakes it at once
                    pause = min(pause * 2, self.idle_max)
        except BaseException as exc:
            with self._lock:
                if self._error is None:
                    self._error = exc
            log.error("worker.error %s: %s", type(exc).__name__, exc)
            self._stop.set()

    def stop(self) -> None:
        """Stop claiming; running handlers finish (within `stop_timeout`) and are settled.

        Safe from any thread, not from a signal handler (run() handles signals).
        """
        self._stop.set()

    def counts(self) -> dict[str, int]:
        """What this worker did so far: events claimed, acked, retried,
        quarantined, lost (not settled: the lease was gone) and abandoned
        (still running when the stop timeout ended)."""
        return self._tally.snapshot()


class StopSignals:
    """``with StopSignals(signums) as received:`` -- while inside, the first of
    these signals is recorded in `received.signum` (run loops poll it; a
    signal handler must not take locks); a second one calls `on_second` and
    exits the process at once with status 128 + signal. Installs nothing
    outside the main thread."""

    def __init__(self, signums: Sequence[int], on_second: Callable[[], None] | None = None) -> None:
        self.signums = tuple(signums) if threading.current_thread() is threading.main_thread() else ()
        self.on_second = on_second
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in self.signums:
            self._previous[signum] = signal.signal(signum, self._received)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _received(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
            return
        if self.on_second is not None:
            self.on_second()
        os.write(2, f"fairq: second {signal.Signals(signum).name}: exiting now; leases will expire\n".encode())
        os._exit(128 + signum)


class _Heartbeat:
    """Extends the leases of held jobs every third of a lease, in one
    background thread that runs while anything is held."""

    def __init__(self, queue: Queue | Client, lease_seconds: float) -> None:
        self._queue = queue
        self._seconds = lease_seconds
        self._lock = threading.Lock()
        self._held: dict[int, Job] = {}
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def hold(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            self._held.update((id(job), job) for job in jobs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="fairq-heartbeat", daemon=True)
                self._thread.start()

    def release(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._held.pop(id(job), None)

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def raise_failure(self) -> None:
        """Raise (once) the queue error a heartbeat met: store errors propagate."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _holding(self, job: Job) -> bool:
        with self._lock:
            return self._held.get(id(job)) is job

    def _beat(self) -> None:
        while True:
            time.sleep(self._seconds / 3)
            with self._lock:
                jobs = list(self._held.values())
                if not jobs:
                    self._thread = None
                    return
            for job in jobs:
                if job.lost or not self._holding(job):
                    continue
                try:
                    job.lease = self._queue.extend(job.lease, self._seconds)
                except LeaseLost as exc:
                    if self._holding(job):  # else it was settled meanwhile: nothing was lost
                        job._lose(exc)
                        log.warning("heartbeat.lost event_id=%s: %s", job.event_id, exc)
                except BaseException as exc:
                    log.error("heartbeat.error %s: %s", type(exc).__name__, exc)
                    with self._lock:
                        self._failure = exc
                        self._thread = None
                    return


class _Tally:
    """The COUNTS of a worker, shared by its threads (and, given a shared
    multiprocessing array, by its processes). Each count also goes to
    `parent`, if given (a child process's own tally feeds its parent's)."""

    def __init__(self, shared: Any = None, parent: _Tally | None = None) -> None:
        self._values = shared if shared is not None else [0] * len(COUNTS)
        self._lock = shared.get_lock() if shared is not None else threading.Lock()
        self._parent = parent

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._values[COUNTS.index(name)] += n
        if self._parent is not None:
            self._parent.add(name, n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(zip(COUNTS, self._values[:]))


def describe(exc: BaseException) -> str:
    """A handler exception as a retry reason: its type and message, printable, bounded."""
    message = str(exc).strip()
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    text = text.replace("\x00", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")
    return text[: v.MAX_REASON_CHARS]


def default_owner() -> str:
    """host:pid, the owner label of a worker that was given none."""
    return f"{socket.gethostname()}:{os.getpid()}"[: v.MAX_ID_CHARS]


def _check_picklable(name: str, value: Any) -> None:
    try:
        pickle.dumps(value)
    except Exception as exc:
        raise InvalidInput(name, f"must be importable by name to run in processes "
                                 f"(a module-level function): {exc}") from None
