"""The Worker: the worker core (fairq.worker.core) driven by threads.

A round claims up to `batch` events (no more than a fair share of the open
heads when other threads or processes of the worker claim too), runs the
handler on each (fairq.worker.handler decides), and settles them in one
settle_many. Whatever the queue itself raises (Busy, a database error)
propagates out of step() and run() and is never turned into a retry; an
error the heartbeat meets is raised only after the batch is settled. run()
stops on a signal, on stop(), or in one of two stop modes: until_idle
(nothing claimable now) and until_empty (nothing left but quarantined
events). What a round and a run decide is the core's; this module calls
what the core asks for, runs handlers under the heartbeat thread
(fairq.worker.heartbeat) and runs the loop in `concurrency` threads.
Processes are run by fairq.worker.processes. No SQL, no policy here.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidInput
from ..tasks import Tasks, check_tasks, check_unknown
from .ahead import ClaimAhead
from .core import Core, drive
from .counts import COUNTS, Tally
from .handler import check_handler, decide
from .heartbeat import Heartbeat, HeldJob
from .outage import Outage
from .job import RELEASE, Decision, Handled, Job, result_limit
from .processes import check_sendable, run_processes, shared_counts
from .settings import check_settings
from .signals import StopSignals
from .stops import stop_mode
from .together import SettleTogether
from .verbs import QueueVerbs, check_queue, waiter

log = logging.getLogger("fairq.worker")


class Worker:
    """Runs a handler on claimed events: step() does one round, run() loops.

    queue: a Queue, a Client of a `fairq serve`, or anything with the verbs
    of QueueVerbs. handler(job) returns (ack) or raises Retry, Fail, Release
    or anything else (retry); an async handler, or one that cannot take a Job,
    is refused here (InvalidInput), and a returned awaitable is a retry.
    handler may be a fairq.Tasks: each job runs the task its kind names
    (a Tasks holding async tasks is refused, UsageError); a job of a kind
    it does not know is quarantined with reason "unknown_kind: NAME", or
    with unknown="release" given back unused (fairq.Tasks.dispatch).
    owner labels leases (default host:pid). concurrency: handler threads
    sharing the queue, or with processes=True, processes each opening the
    file again (the handler must then be importable by name and the queue's
    settings() must pickle; process_init() runs first in each). batch > 1:
    each round claims up to `batch` events with claim_many (at most one per
    flow, and with concurrency > 1 no more than a fair share of the open
    heads) and settles them with one settle_many. lease_seconds: each
    claim's lease (default the queue's); a heartbeat extends it every third
    of it while the handler runs. timeout: seconds a handler may run; past
    it its event is retried with reason "timeout" (a worker process is then
    replaced). tick: also turn due schedule slots into events, at most once
    per idle_max. stop_timeout: seconds running handlers get to finish after
    a stop; those still running then are abandoned and their leases expire
    (the unstarted rest of their batches is released). idle_min, idle_max: an
    idle worker polls after idle_min seconds, doubling up to idle_max. listen:
    on a queue that tells of new work (PostgreSQL: LISTEN/NOTIFY), sleep until
    it does or a waiting event is due, at most idle_max; False polls (PgBouncer
    transaction mode). run() waits out a server out of reach (Unavailable), reconnecting.
    """

    def __init__(
        self, queue: QueueVerbs, handler: Callable[[Job], Any] | Tasks, *, owner: str | None = None,
        concurrency: int = 1, batch: int = 1, processes: bool = False,
        lease_seconds: float | None = None, timeout: float | None = None, tick: bool = False,
        stop_timeout: float = 30.0, idle_min: float = 0.01, idle_max: float = 1.0,
        process_init: Callable[[], Any] | None = None, listen: bool = True, unknown: str = "quarantine",
    ) -> None:
        for name, flag in (("processes", processes), ("tick", tick), ("listen", listen)):
            if not isinstance(flag, bool):
                raise InvalidInput(name, "must be True or False")
        self.queue = check_queue(queue, tick=tick)
        self.unknown = check_unknown(unknown)
        self.handler = check_tasks(handler, sync=True) if isinstance(handler, Tasks) else check_handler(handler)
        self._call = self._dispatch if isinstance(self.handler, Tasks) else self.handler
        settings = check_settings(owner, concurrency, batch, lease_seconds, timeout, stop_timeout, idle_min,
                                  idle_max, max_concurrency=1024, default_lease=lambda: queue.lease_seconds)
        (self.owner, self.concurrency, self.batch, self.lease_seconds, self.timeout, self.stop_timeout,
         self.idle_min, self.idle_max) = settings
        self.processes = processes
        self.tick = tick
        self.listen = listen
        self._waiter = waiter(self.queue) if listen else None
        if process_init is not None and not callable(process_init):
            raise InvalidInput("process_init", "must be callable")
        self.process_init = process_init
        self._owner_arg = owner
        self._stop = threading.Event()
        self._outage = Outage(self.queue)
        self._heartbeat = Heartbeat(self.queue, self.lease_seconds, timeout=self.timeout, settle=self._settle)
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        #: The rounds, claims, settles, stop modes and backoff; its calls are made here.
        self.core = Core(settings, self.queue, tick=tick, ahead=ClaimAhead, together=SettleTogether,
                         reconnects=lambda: self._outage.reconnects)
        if processes:
            check_sendable(handler, process_init, self.queue)
            self.core.tally = Tally(shared_counts(len(COUNTS)))

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
        leases = drive(self.core.claim())
        if not leases:
            return []
        jobs = [Job(lease, self._stop) for lease in leases]
        batch = self._heartbeat.hold(jobs)
        try:
            for i, held in enumerate(batch):
                self._run_job(held, first=i == 0)
        finally:
            self._heartbeat.drop(batch)
        mine, decisions, by_timeout = self._heartbeat.finish(batch)
        settled = dict(zip(map(id, mine), self._settle(mine, decisions)))
        handled = [h for job in jobs if (h := by_timeout.get(id(job)) or settled.get(id(job))) is not None]
        failure = self._heartbeat.failure(batch)
        if failure is not None:  # raised only now: a heartbeat error costs no finished work
            raise failure
        return handled

    def _run_job(self, held: HeldJob, *, first: bool) -> None:
        """Run the handler on the job, unless the worker stops before a later
        job of a batch starts (release) or it was taken back (nothing)."""
        if not self._heartbeat.begin(held, first=first):
            return
        decision: Decision = RELEASE
        try:
            decision = decide(self._call, held.job, max_bytes=result_limit(self.queue))
        finally:
            self._heartbeat.done(held, decision)

    def _dispatch(self, job: Job) -> Any:
        """A Tasks handler's call: the job's task (decide() reads a decision it returns as one raised)."""
        assert isinstance(self.handler, Tasks)
        return self.handler.dispatch(job, self.unknown)

    def _settle(self, jobs: Sequence[Job], decisions: Sequence[Decision]) -> list[Handled]:
        """Settle every job whose lease was not found lost, in one transaction; count and log each."""
        return drive(self.core.settle(jobs, decisions))

    # -- the loop ----------------------------------------------------------------

    def run(self, until_idle: bool = False, *, until_empty: bool = False, signals: bool = True) -> dict[str, int]:
        """Handle events until stopped, or in a stop mode; returns counts().

        until_idle: return once no event is claimable now and no handler of
        this worker runs (events backing off or delayed are left behind).
        until_empty: return once the queue holds nothing ready, waiting
        (delayed, backing off) or inflight -- only quarantined events, which
        wait for a redrive, may remain.

        signals=True (and called from the main thread): the first SIGTERM or
        SIGINT stops claiming and gives running handlers `stop_timeout` seconds to
        finish and be settled; a second one exits the process at once
        (status 128 + signal; its leases expire and others take over).
        Raises the first error the queue raised in any thread or process
        (FairqError when a worker process exited with an error).
        """
        mode = stop_mode(until_idle, until_empty)
        self._stop = threading.Event()  # this run's: stop() sets it, its threads and jobs watch it
        try:
            if self.processes:
                return run_processes(self, mode, signals=signals)
            with StopSignals((signal.SIGTERM, signal.SIGINT) if signals else (),
                             stop_timeout=self.stop_timeout) as received:
                return self.run_threads(mode, received)
        finally:
            self._stop = threading.Event()  # a step() after run() returned is not stopping

    def run_threads(self, mode: str | None, received: StopSignals) -> dict[str, int]:
        """run() with `concurrency` threads in this process; `received` tells of stop signals."""
        stop = self._stop
        self._error = None
        threads = [threading.Thread(target=self._loop, args=(mode, stop), name=f"fairq-worker-{i}",
                                    daemon=True) for i in range(self.concurrency)]
        log.info("worker.start owner=%s concurrency=%d batch=%d lease_seconds=%s timeout=%s tick=%s stop=%s",
                 self.owner, self.concurrency, self.batch, self.lease_seconds, self.timeout, self.tick,
                 mode or "signal")
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
        abandoned = self.running_handlers()
        if abandoned:
            self.core.tally.add("abandoned", abandoned)
            log.warning("worker.abandoned handlers=%d stop_timeout=%s", abandoned, self.stop_timeout)
        counts = self.counts()
        log.info("worker.stop %s", " ".join(f"{k}={n}" for k, n in counts.items()))
        if self._error is not None:
            raise self._error
        return counts

    def _release_unstarted(self) -> None:
        """Give back the jobs of abandoned batches that no handler started, and
        leases claimed ahead that no thread took: ready at once, their attempts unspent."""
        left = [Job(lease, self._stop) for lease in self.core.left_ahead()]
        unstarted = [*self._heartbeat.take_unstarted(), *left]
        try:
            drive(self.core.release(unstarted))
        except BaseException as exc:  # a queue error: run() raises it (or the one met first)
            with self._lock:
                self._error = self._error or exc

    def _loop(self, mode: str | None, stop: threading.Event) -> None:
        """One run() thread: the core's rounds until `stop`, its calls made here."""
        try:
            if drive(self.core.loop(mode, stop.is_set, self.step, lambda seconds: self._pause(stop, seconds),
                                    lambda exc, seen, pause: self._outage.recover(exc, seen, stop, pause))):
                stop.set()
        except BaseException as exc:
            with self._lock:
                if self._error is None:
                    self._error = exc
            log.error("worker.error error=%r", f"{type(exc).__name__}: {exc}")
            stop.set()

    def _pause(self, stop: threading.Event, seconds: float) -> bool:
        """An idle thread's wait before its next claim: monotonic, and a stop ends it at
        once; a queue that tells of new work ends it early. True when it listened."""
        if self._waiter is None:
            stop.wait(seconds)
            return False
        return self._waiter.wait_for_work(seconds, stop)

    def child_options(self) -> dict[str, Any]:
        """The settings a worker process builds its own one-thread Worker with."""
        return {"owner": self._owner_arg, "batch": self.batch, "lease_seconds": self.lease_seconds,
                "timeout": self.timeout, "tick": self.tick, "stop_timeout": self.stop_timeout,
                "idle_min": self.idle_min, "idle_max": self.idle_max, "listen": self.listen,
                "unknown": self.unknown}

    @property
    def stop_requested(self) -> bool:
        """True once stop() was called in this run."""
        return self._stop.is_set()

    def running_handlers(self) -> int:
        """Handlers of this worker running now (still held: not given up after a timeout)."""
        return self._heartbeat.running()

    def on_timeout(self, callback: Callable[[], Any]) -> None:
        """Call `callback` (in the heartbeat thread) after a timeout's batch is settled."""
        self._heartbeat.on_timeout = callback

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
        return self.core.tally.snapshot()

