"""The worker loop: claim, run a handler, settle; heartbeats and graceful stop.

A handler is a function of one Job. Returning settles its event as ack;
raising Retry(reason, delay=None) or Fail(reason) settles it as retry or
fail; any other exception is a retry whose reason is the exception's type and
message. The try/except wraps only the handler: whatever the queue itself
raises (Busy, a database error) propagates out of step() and run() and is
never turned into a retry; an error the heartbeat meets is raised only after
the batch is settled (Busy and Unavailable there are tried again at the next
beat). While handlers run, a heartbeat thread extends their leases; a lease
it finds lost is reported to the handler (Job.lost) and its event is not
settled. Claimed jobs a stop leaves unstarted are released (ready at once,
attempts unspent). Concurrency is threads sharing one Queue, or processes
(fairq._processes) each opening their own. The queue may also be a
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
from .errors import Busy, InvalidInput, LeaseLost, Unavailable
from .http.client import Client
from .queue import MAX_BATCH, Queue
from .types import Lease, Outcome, Settled, State

__all__ = ["Worker", "Job", "Handled", "Retry", "Fail"]

log = logging.getLogger("fairq")

#: What a worker counts; Worker.counts() and run() return these keys.
COUNTS = ("claimed", "acked", "retried", "released", "quarantined", "lost", "abandoned")
#: Heartbeat errors that are tried again at the next beat: the database stayed
#: locked past the busy timeout, or the server did not answer.
_TRANSIENT = (Busy, Unavailable)
_COUNT_FOR = {State.ACKED: "acked", State.READY: "retried", State.QUARANTINED: "quarantined"}
#: A handler's decision: (outcome, reason, delay) for its settle.
_Decision = tuple[Outcome, str | None, float | None]


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

    __slots__ = ("lease", "_stop", "_lost", "_phase", "_failure")

    def __init__(self, lease: Lease, stop: threading.Event) -> None:
        self.lease = lease
        self._stop = stop
        self._lost: LeaseLost | None = None
        self._phase = _WAITING  # changed only under the _Heartbeat's lock
        self._failure: BaseException | None = None  # a heartbeat error that is not transient

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
    (ack) or raises Retry, Fail or anything else (retry). owner labels
    leases (default host:pid). concurrency: handler threads sharing the
    queue, or with processes=True, processes each opening the file again
    (the handler must then be importable by name and the queue's settings()
    must pickle; process_init() runs first in each). batch > 1: each round
    claims up to `batch` events with claim_many (at most one per flow) and
    settles them with one settle_many. lease_seconds: each claim's lease
    (default the queue's); a heartbeat extends it every third of it while
    the handler runs. stop_timeout: seconds running handlers get to finish
    after a stop; those still running then are abandoned and their leases
    expire (the unstarted rest of their batches is released). idle_min,
    idle_max: an idle worker polls after idle_min seconds, doubling up to
    idle_max.
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
        self._busy_rounds = 0  # rounds that handled something: until_idle sees settles it did not wait for
        self._error: BaseException | None = None
        if processes:
            from ._processes import reopener, shared_counts

            for name, value in (("handler", handler), ("process_init", process_init)):
                _check_picklable(name, value, "must be importable by name to run in processes "
                                              "(a module-level function)")
            _check_picklable("queue", reopener(queue), "its settings() must pickle to open it again in each "
                                                       "worker process (e.g. clock= a module-level function)")

            self._tally = _Tally(shared_counts(len(COUNTS)))
        else:
            self._tally = _Tally()

    # -- one round -------------------------------------------------------------

    def step(self) -> list[Handled]:
        """Claim up to `batch` events, run the handler on each, settle them.

        Returns what happened to each event, in claim order; [] when nothing
        was claimable. If the worker is stopping when a later job of the batch
        would start, that job is released instead (ready at once, its attempt
        unspent). Errors of the queue itself propagate; one met by the
        heartbeat (other than Busy or Unavailable, which the next beat tries
        again) is raised after the batch is settled.
        """
        leases = self.queue.claim_many(self.batch, owner=self.owner, lease_seconds=self.lease_seconds)
        if not leases:
            return []
        self._tally.add("claimed", len(leases))
        jobs = [Job(lease, self._stop) for lease in leases]
        decisions: list[_Decision | None] = []
        self._heartbeat.hold(jobs)
        try:
            for i, job in enumerate(jobs):
                decisions.append(self._run_job(job, first=i == 0))
        finally:
            self._heartbeat.drop(jobs)
        handled = self._settle(jobs, decisions)
        for job in jobs:  # raised only now: a heartbeat error costs no finished work
            if job._failure is not None:
                raise job._failure
        return handled

    def _run_job(self, job: Job, *, first: bool) -> _Decision | None:
        """The job's decision: the handler's; release when the worker stops
        before a later job of a batch starts; None when run() took it back."""
        phase = self._heartbeat.begin(job, first=first)
        if phase == _RELEASED:
            return _RELEASE
        if phase != _RUNNING:
            return None
        try:
            return self._decide(job)
        finally:
            self._heartbeat.done(job)

    def _decide(self, job: Job) -> _Decision:
        """Run the handler on one job: (outcome, reason, delay) for its settle."""
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

    def _settle(self, jobs: Sequence[Job], decisions: Sequence[_Decision | None]) -> list[Handled]:
        """Settle every decided job whose lease the heartbeat did not find lost, in one transaction.

        A job without a decision was given back by run() when it abandoned the batch: it is skipped.
        """
        out: list[Handled | None] = [None] * len(jobs)
        items, slots = [], []
        for i, (job, decision) in enumerate(zip(jobs, decisions)):
            if decision is None:
                continue
            outcome, reason, delay = decision
            if job._lost is not None:
                out[i] = Handled(job.event_id, outcome, reason, None, job._lost)
            else:
                items.append((job.lease, outcome, reason, delay))
                slots.append((i, outcome, reason))
        results = self.queue.settle_many(items) if items else []
        for (i, outcome, reason), result in zip(slots, results):
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
                self._tally.add("released" if h.outcome is Outcome.RELEASE else _COUNT_FOR[h.settled.state])
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
        Raises the first error the queue raised in any thread or process
        (FairqError when a worker process exited with an error).
        """
        self._stop = threading.Event()  # this run's: stop() sets it, its threads and jobs watch it
        try:
            if self.processes:
                from ._processes import run_processes

                return run_processes(self, until_idle, signals=signals)
            with StopSignals((signal.SIGTERM, signal.SIGINT) if signals else ()) as received:
                return self._run_threads(until_idle, received)
        finally:
            self._stop = threading.Event()  # a step() after run() returned is not stopping

    def _run_threads(self, until_idle: bool, received: StopSignals) -> dict[str, int]:
        """run() with `concurrency` threads in this process; `received` tells of stop signals."""
        stop = self._stop
        self._error = None
        threads = [threading.Thread(target=self._loop, args=(until_idle, stop), name=f"fairq-worker-{i}",
                                    daemon=True) for i in range(self.concurrency)]
        log.info("worker.start owner=%s concurrency=%d batch=%d lease_seconds=%s until_idle=%s",
                 self.owner, self.concurrency, self.batch, self.lease_seconds, until_idle)
        for thread in threads:
            thread.start()
        while not stop.wait(0.05):
            if received.signum is not None:
                log.info("worker.stopping signal=%s stop_timeout=%s", signal.Signals(received.signum).name,
                         self.stop_timeout)
                stop.set()
        deadline = time.monotonic() + self.stop_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._release_unstarted()
        abandoned = self._heartbeat.running()
        if abandoned:
            self._tally.add("abandoned", abandoned)
            log.warning("worker.abandoned handlers=%d stop_timeout=%s their leases will expire", abandoned,
                        self.stop_timeout)
        counts = self.counts()
        log.info("worker.stop %s", " ".join(f"{k}={n}" for k, n in counts.items()))
        if self._error is not None:
            raise self._error
        return counts

    def _release_unstarted(self) -> None:
        """Give back the jobs of abandoned batches that no handler started:
        ready at once, their attempts unspent."""
        unstarted = self._heartbeat.take_unstarted()
        if not unstarted:
            return
        try:
            self._settle(unstarted, [_RELEASE] * len(unstarted))
        except BaseException as exc:  # a queue error: run() raises it (or the one met first)
            with self._lock:
                self._error = self._error or exc

    def _loop(self, until_idle: bool, stop: threading.Event) -> None:
        """One run() thread: rounds until `stop`; idle rounds back off from idle_min to idle_max."""
        pause = self.idle_min
        try:
            while not stop.is_set():
                seen = self._begin_round()
                handled: list[Handled] = []
                try:
                    handled = self.step()
                finally:
                    self._end_round(handled, seen, stop if until_idle else None)
                if handled:
                    pause = self.idle_min
                else:
                    self._pause(stop, pause)
                    pause = min(pause * 2, self.idle_max)
        except BaseException as exc:
            with self._lock:
                if self._error is None:
                    self._error = exc
            log.error("worker.error %s: %s", type(exc).__name__, exc)
            stop.set()

    def _begin_round(self) -> int:
        """A run() thread starts a round: returns the count of rounds that handled something so far."""
        with self._lock:
            self._active += 1
            return self._busy_rounds

    def _end_round(self, handled: list[Handled], seen: int, idle_stop: threading.Event | None) -> None:
        """A run() thread ends a round begun when `seen` rounds had handled something.

        With until_idle (idle_stop given), an empty round stops the run only
        if no thread is inside a round and no round handled anything since
        this one began: a settle meanwhile may have made work claimable.
        """
        with self._lock:
            self._active -= 1
            if handled:
                self._busy_rounds += 1
            idle = not handled and self._active == 0 and self._busy_rounds == seen
        if idle and idle_stop is not None:
            idle_stop.set()

    def _pause(self, stop: threading.Event, seconds: float) -> None:
        """An idle thread's wait before its next claim: monotonic, and a stop ends it at once."""
        stop.wait(seconds)

    def stop(self) -> None:
        """Stop claiming; running handlers finish (within `stop_timeout`) and are settled.

        Safe from any thread, not from a signal handler (run() handles signals).
        """
        self._stop.set()

    def counts(self) -> dict[str, int]:
        """What this worker did so far: events claimed, acked, retried,
        released (given back unstarted), quarantined, lost (not settled: the
        lease was gone) and abandoned (still running when the stop timeout
        ended); the keys are COUNTS."""
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


# A held job's phases (Job._phase); begin() answers _GONE for a job run() took back.
_WAITING, _RUNNING, _DONE, _RELEASED, _GONE = "waiting", "running", "done", "released", "gone"
#: The decision for a job the worker gives back unused.
_RELEASE: _Decision = (Outcome.RELEASE, None, None)


class _Heartbeat:
    """The jobs a worker holds, and one background thread that extends their
    leases every third of a lease while any is held.

    A held job is waiting (claimed, not started), running, done (decided,
    not yet settled) or released (the worker gives it back unused). begin()
    and take_unstarted() move a waiting job under one lock, so a job is
    either started by its thread or given back by run(), never both.
    sleep(seconds) is how the thread waits between beats (tests drive it).
    """

    def __init__(self, queue: Queue | Client, lease_seconds: float,
                 sleep: Callable[[float], Any] = time.sleep) -> None:
        self._queue = queue
        self._seconds = lease_seconds
        self._sleep = sleep
        self._lock = threading.Lock()
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
        and it is not the first of its batch; "gone" if run() took it back."""
        with self._lock:
            if self._held.get(id(job)) is not job:
                return _GONE
            job._phase = _RELEASED if job.stopping and not first else _RUNNING
            return job._phase

    def done(self, job: Job) -> None:
        with self._lock:
            if job._phase == _RUNNING:
                job._phase = _DONE

    def drop(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            for job in jobs:
                self._held.pop(id(job), None)

    def take_unstarted(self) -> list[Job]:
        """Stop holding the waiting jobs and return them, for run() to release."""
        with self._lock:
            waiting = [job for job in self._held.values() if job._phase == _WAITING]
            for job in waiting:
                del self._held[id(job)]
            return waiting

    def running(self) -> int:
        """Held jobs whose handler runs now."""
        with self._lock:
            return sum(job._phase == _RUNNING for job in self._held.values())

    def _holding(self, job: Job) -> bool:
        with self._lock:
            return self._held.get(id(job)) is job

    def _beat(self) -> None:
        while True:
            self._sleep(self._seconds / 3)
            with self._lock:
                jobs = list(self._held.values())
                if not jobs:
                    self._thread = None
                    return
            for job in jobs:
                if job.lost or job._failure is not None or not self._holding(job):
                    continue
                try:
                    job.lease = self._queue.extend(job.lease, self._seconds)
                except LeaseLost as exc:
                    if self._holding(job):  # else it was settled meanwhile: nothing was lost
                        job._lose(exc)
                        log.warning("heartbeat.lost event_id=%s: %s", job.event_id, exc)
                except _TRANSIENT as exc:  # the lease still runs; the next beat tries again
                    log.warning("heartbeat.busy event_id=%s %s: %s", job.event_id, type(exc).__name__, exc)
                except BaseException as exc:  # raised by the job's step() once its batch is settled
                    job._failure = exc
                    log.error("heartbeat.error event_id=%s %s: %s", job.event_id, type(exc).__name__, exc)


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


def _check_picklable(name: str, value: Any, problem: str) -> None:
    """Refuse, as InvalidInput on `name`, what cannot be sent to a spawned process."""
    try:
        pickle.dumps(value)
    except Exception as exc:
        raise InvalidInput(name, f"{problem}: {exc}") from None
