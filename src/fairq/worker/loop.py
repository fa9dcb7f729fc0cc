"""The Worker: its settings, one round (step) and the run loop in threads.

A round claims up to `batch` events (no more than a fair share of the open
heads when other threads or processes of the worker claim too), runs the
handler on each (fairq.worker.handler decides), and settles them in one
settle_many. Whatever the queue itself raises (Busy, a database error)
propagates out of step() and run() and is never turned into a retry; an
error the heartbeat meets is raised only after the batch is settled. run()
stops on a signal, on stop(), or in one of two stop modes: until_idle
(nothing claimable now) and until_empty (nothing left but quarantined
events). Processes are run by fairq.worker.processes. No SQL, no policy here.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import FairqError, InvalidInput, LeaseLost, Unavailable
from ..types import Settled, State
from .ahead import ClaimAhead
from .counts import COUNTS, Tally, count
from .handler import check_handler, decide
from .heartbeat import Heartbeat
from .outage import Outage
from .job import GONE, RELEASE, RELEASED, RUNNING, Decision, Handled, Job
from .processes import check_sendable, run_processes, shared_counts
from .settings import check_settings
from .signals import StopSignals
from .together import SettleTogether
from .stops import fair_share, log_tick, log_tick_failed, only_quarantined_left, stop_mode
from .verbs import QueueVerbs, check_queue, waiter

log = logging.getLogger("fairq.worker")


class Worker:
    """Runs a handler on claimed events: step() does one round, run() loops.

    queue: a Queue, a Client of a `fairq serve`, or anything with the verbs
    of QueueVerbs. handler(job) returns (ack) or raises Retry, Fail or
    anything else (retry); an async handler, or one that cannot take a Job,
    is refused here (InvalidInput), and a returned awaitable is a retry.
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
        self, queue: QueueVerbs, handler: Callable[[Job], Any], *, owner: str | None = None,
        concurrency: int = 1, batch: int = 1, processes: bool = False,
        lease_seconds: float | None = None, timeout: float | None = None, tick: bool = False,
        stop_timeout: float = 30.0, idle_min: float = 0.01, idle_max: float = 1.0,
        process_init: Callable[[], Any] | None = None, listen: bool = True,
    ) -> None:
        for name, flag in (("processes", processes), ("tick", tick), ("listen", listen)):
            if not isinstance(flag, bool):
                raise InvalidInput(name, "must be True or False")
        self.queue = check_queue(queue, tick=tick)
        self.handler = check_handler(handler)
        (self.owner, self.concurrency, self.batch, self.lease_seconds, self.timeout, self.stop_timeout,
         self.idle_min, self.idle_max) = check_settings(
            owner, concurrency, batch, lease_seconds, timeout, stop_timeout, idle_min, idle_max,
            max_concurrency=1024, default_lease=lambda: queue.lease_seconds)
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
        self._active = 0  # threads inside step(): until_idle waits for all of them
        self._busy_rounds = 0  # rounds that handled something: until_idle sees settles it did not wait for
        self._next_tick = 0.0  # monotonic time of the next tick
        self._error: BaseException | None = None
        #: Claimers sharing the queue's heads: this worker's threads, or in a
        #: worker process all of its parent's processes.
        self.peers = self.concurrency
        #: A worker process's until_idle also waits for its siblings' leases.
        self.idle_needs_no_inflight = False

        #: With threads running one job each, one claim for every thread about to claim.
        self._ahead = (ClaimAhead(lambda n: self.queue.claim_many(n, owner=self.owner,
                                                                  lease_seconds=self.lease_seconds),
                                  self.concurrency) if self.batch == 1 and self.concurrency > 1 else None)
        #: With threads, the settles of those finishing at once share one settle_many.
        self._settles: SettleTogether[Settled | LeaseLost] | None = (
            SettleTogether(self.queue.settle_many) if self.concurrency > 1 else None)
        if processes:
            check_sendable(handler, process_init, self.queue)
            self.tally = Tally(shared_counts(len(COUNTS)))
        else:
            self.tally = Tally()

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
        leases = (self._ahead.take() if self._ahead is not None else
                  self.queue.claim_many(self._claim_size(), owner=self.owner, lease_seconds=self.lease_seconds))
        if not leases:
            return []
        self.tally.add("claimed", len(leases))
        jobs = [Job(lease, self._stop) for lease in leases]
        for job in jobs:
            job._batch = jobs
        self._heartbeat.hold(jobs)
        try:
            for i, job in enumerate(jobs):
                self._run_job(job, first=i == 0)
        finally:
            self._heartbeat.drop(jobs)
        handled = self._settle_batch(jobs)
        for job in jobs:  # raised only now: a heartbeat error costs no finished work
            if job._failure is not None:
                raise job._failure
        return handled

    def _claim_size(self) -> int:
        """`batch`, or with peers claiming too, no more than a fair share of the open heads
        (so one claimer's batch does not hold heads the others could be working on)."""
        if self.batch == 1 or self.peers == 1:
            return self.batch
        return fair_share(self.queue.stats(top=0), self.batch, self.peers)

    def _run_job(self, job: Job, *, first: bool) -> None:
        """Run the handler on the job, unless the worker stops before a later
        job of a batch starts (release) or it was taken back (nothing)."""
        phase = self._heartbeat.begin(job, first=first)
        if phase == RELEASED:
            job._decision = RELEASE
        if phase != RUNNING:
            return
        decision: Decision = RELEASE
        try:
            decision = decide(self.handler, job)
        finally:
            self._heartbeat.done(job, decision)

    def _settle_batch(self, jobs: Sequence[Job]) -> list[Handled]:
        """Settle the batch's decided jobs; a job a timeout settled is reported as it was."""
        self._heartbeat.wait_settled(jobs)
        mine = [job for job in jobs if job._phase != GONE and job._decision is not None]
        decisions = [job._decision for job in mine if job._decision is not None]
        settled = dict(zip(map(id, mine), self._settle(mine, decisions)))
        return [h for job in jobs if (h := job._handled or settled.get(id(job))) is not None]

    def _settle(self, jobs: Sequence[Job], decisions: Sequence[Decision]) -> list[Handled]:
        """Settle every job whose lease was not found lost, in one transaction; count and log each."""
        out: list[Handled | None] = [None] * len(jobs)
        items, slots = [], []
        for i, (job, (outcome, reason, delay)) in enumerate(zip(jobs, decisions)):
            if job._lost is not None:
                out[i] = Handled(job.event_id, outcome, reason, None, job._lost)
            else:
                items.append((job.lease, outcome, reason, delay))
                slots.append((i, outcome, reason))
        results = ((self._settles.settle(items) if self._settles is not None else self.queue.settle_many(items))
                   if items else [])
        for (i, outcome, reason), result in zip(slots, results):
            if isinstance(result, LeaseLost):
                out[i] = Handled(jobs[i].event_id, outcome, reason, None, result)
            else:
                out[i] = Handled(jobs[i].event_id, outcome, reason, result)
        handled = [h for h in out if h is not None]
        for job, h in zip(jobs, handled):
            count(self.tally, job, h)
        return handled

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
            with StopSignals((signal.SIGTERM, signal.SIGINT) if signals else ()) as received:
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
            self.tally.add("abandoned", abandoned)
            log.warning("worker.abandoned handlers=%d stop_timeout=%s", abandoned, self.stop_timeout)
        counts = self.counts()
        log.info("worker.stop %s", " ".join(f"{k}={n}" for k, n in counts.items()))
        if self._error is not None:
            raise self._error
        return counts

    def _release_unstarted(self) -> None:
        """Give back the jobs of abandoned batches that no handler started, and
        leases claimed ahead that no thread took: ready at once, their attempts unspent."""
        left = self._ahead.left() if self._ahead is not None else []
        self.tally.add("claimed", len(left))
        unstarted = [*self._heartbeat.take_unstarted(), *(Job(lease, self._stop) for lease in left)]
        if not unstarted:
            return
        try:
            self._settle(unstarted, [RELEASE] * len(unstarted))
        except BaseException as exc:  # a queue error: run() raises it (or the one met first)
            with self._lock:
                self._error = self._error or exc

    def _loop(self, mode: str | None, stop: threading.Event) -> None:
        """One run() thread: rounds until `stop`; idle rounds (and Unavailable) back off from
        idle_min to idle_max (straight to idle_max while the queue listens for new work)."""
        pause = self.idle_min
        try:
            while not stop.is_set():
                self._tick_if_due()
                reconnects = self._outage.reconnects
                try:
                    handled, done = self._round(mode)
                except Unavailable as exc:
                    self._outage.recover(exc, reconnects, stop, pause)
                    pause = min(pause * 2, self.idle_max)
                    continue
                if done:
                    stop.set()
                elif handled:
                    pause = self.idle_min
                elif self._pause(stop, pause):
                    pause = self.idle_max  # a notification ends the wait: no need to poll sooner
                else:
                    pause = min(pause * 2, self.idle_max)
        except BaseException as exc:
            with self._lock:
                if self._error is None:
                    self._error = exc
            log.error("worker.error error=%r", f"{type(exc).__name__}: {exc}")
            stop.set()

    def _tick_if_due(self) -> None:
        """With tick=True, turn due schedule slots into events, at most once per idle_max (any thread)."""
        if not self.tick:
            return
        with self._lock:
            now = time.monotonic()
            if now < self._next_tick:
                return
            self._next_tick = now + self.idle_max
        try:
            made = self.queue.tick()
        except FairqError as exc:
            log_tick_failed(exc)
            return
        log_tick(made)

    def _round(self, mode: str | None) -> tuple[list[Handled], bool]:  # (handled, stop now?)
        seen = self._begin_round()
        handled: list[Handled] = []
        try:
            handled = self.step()
        finally:
            done = self._end_round(handled, seen, mode)
        return handled, done

    def _begin_round(self) -> int:
        """A run() thread starts a round: returns the count of rounds that handled something so far."""
        with self._lock:
            self._active += 1
            return self._busy_rounds

    def _end_round(self, handled: list[Handled], seen: int, mode: str | None) -> bool:
        """A run() thread ends a round begun when `seen` rounds had handled something;
        True when the run's stop mode says to stop.

        until_idle: an empty round stops the run only if no thread is inside
        a round and no round handled anything since this one began (a settle
        meanwhile may have made work claimable); in a worker process, also
        only if no event is inflight (a sibling's settle may make work
        claimable). until_empty: an empty round stops the run once every flow's
        head is quarantined or the flow is gone.
        """
        with self._lock:
            self._active -= 1
            if handled:
                self._busy_rounds += 1
            idle = not handled and self._active == 0 and self._busy_rounds == seen
        if handled or mode is None:
            return False
        if mode == "until_idle":
            if idle and self.idle_needs_no_inflight:
                return self.queue.stats(top=0).counts[State.INFLIGHT.value] == 0
            return idle
        return only_quarantined_left(self.queue.stats(top=0))

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
                "idle_min": self.idle_min, "idle_max": self.idle_max, "listen": self.listen}

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
        return self.tally.snapshot()

