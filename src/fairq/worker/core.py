"""The worker core: what a run does round after round, the same for threads and for asyncio.

Here live claim sizing and claim-ahead, settle bookkeeping (Handled, counts,
lost leases, settle-together), the stop modes, the idle backoff, where
outage recovery comes in, and ticking. The core makes no call itself and
knows nothing of threads or event loops: each piece is a generator that
yields the calls it needs made, as (function, args), and is sent back each
call's result (or has its error thrown in). A driver makes the calls its
own way: fairq.Worker calls them (drive()), fairq.aio.AsyncWorker awaits
them. The functions are the driver's: its queue's verbs, its claim-ahead
and settle-together (threads' or tasks'), its pause, outage recovery and
step. No SQL, no policy here.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from ..errors import FairqError, LeaseLost, Unavailable
from ..types import Lease, Outcome, Settled, State
from .counts import Tally, count
from .job import RELEASE, Decision, Handled, Job
from .settings import Settings
from .stops import fair_share, log_tick, log_tick_failed, only_quarantined_left

R = TypeVar("R")
#: A call the core asks its driver to make: the function and its positional arguments.
Call = tuple[Callable[..., Any], tuple[Any, ...]]
#: A piece of the core: yields calls, is sent their results, returns R.
Steps = Generator[Call, Any, R]


def drive(steps: Steps[R]) -> R:
    """Run a piece of the core by calling each call it yields (a blocking driver's way):
    its result is sent back, its error thrown in (the core decides what passes through)."""
    resume: Callable[[Any], Call] = steps.send
    answer: Any = None
    while True:
        try:
            fn, args = resume(answer)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]
        try:
            answer, resume = fn(*args), steps.send
        except BaseException as exc:
            answer, resume = exc, steps.throw


class Core:
    """One worker's rounds: claim, settle, stop modes, backoff and ticking, over a driver's calls.

    queue: the driver's queue (its claim_many, settle_many, stats and tick are
    yielded, never called here). ahead and together: the driver's ClaimAhead
    and SettleTogether classes (or their asyncio twins); with batch 1 and
    concurrency > 1 the rounds about to claim share one claim, and with
    concurrency > 1 settles finishing together share one settle_many.
    reconnects() counts the reconnections so far (fairq.worker.outage);
    clock is monotonic seconds. `peers`: claimers sharing the
    queue's heads (this worker's rounds, or in a worker process all of its
    parent's processes); `idle_needs_no_inflight`: a worker process's
    until_idle also waits for its siblings' leases; `tally`: the counts.
    """

    def __init__(self, settings: Settings, queue: Any, *, tick: bool, ahead: Callable[..., Any],
                 together: Callable[..., Any], reconnects: Callable[[], int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.tally = Tally()
        self.peers = settings.concurrency
        self.idle_needs_no_inflight = False
        claim_many = functools.partial(queue.claim_many, owner=settings.owner, lease_seconds=settings.lease_seconds)
        self._claim: Callable[..., Any] = claim_many
        self._ahead = ahead(claim_many, settings.concurrency) if settings.batch == 1 and settings.concurrency > 1 \
            else None
        self._settle: Callable[..., Any] = (together(queue.settle_many).settle if settings.concurrency > 1
                                            else queue.settle_many)
        self._stats = functools.partial(queue.stats, top=0)
        self._tick: Callable[..., Any] | None = queue.tick if tick else None  # checked present when ticking
        self._reconnects = reconnects
        self._lock = threading.Lock()  # the round counters, shared by the driver's threads or tasks
        self._clock = clock
        self._active = 0  # rounds in progress: until_idle waits for all of them
        self._busy_rounds = 0  # rounds that handled something: until_idle sees settles it did not wait for
        self._released: set[str] = set()  # events only released since a round last did work
        self._next_tick = 0.0  # clock time of the next tick

    # -- one round's claim and settle -------------------------------------------

    def claim(self) -> Steps[list[Lease]]:
        """A round's leases ([] when nothing was claimable): one claimed ahead, or a claim of
        up to `batch` (no more than a fair share of the open heads when peers claim too)."""
        if self._ahead is not None:
            leases = yield (self._ahead.take, ())
        else:
            size = self.settings.batch
            if size > 1 and self.peers > 1:
                size = fair_share((yield (self._stats, ())), size, self.peers)
            leases = yield (self._claim, (size,))
        if leases:
            self.tally.add("claimed", len(leases))
        return list(leases)

    def settle(self, jobs: Sequence[Job], decisions: Sequence[Decision]) -> Steps[list[Handled]]:
        """Settle as decided every job whose lease was not found lost, in one settle_many;
        count and log each."""
        out: list[Handled | None] = [None] * len(jobs)
        items, slots = [], []
        for i, (job, (outcome, reason, delay, result)) in enumerate(zip(jobs, decisions)):
            if job.loss is not None:
                out[i] = h = Handled(job.event_id, outcome, reason, None, job.loss)
                count(self.tally, job, h)
            else:
                # An ack's result goes with it, in the settle's one transaction.
                items.append((job.lease, outcome, reason, delay) if result is None
                             else (job.lease, outcome, reason, delay, result))
                slots.append((i, outcome, reason))
        results: list[Settled | LeaseLost] = (yield (self._settle, (items,))) if items else []
        for (i, outcome, reason), result in zip(slots, results):
            if isinstance(result, LeaseLost):
                out[i] = h = Handled(jobs[i].event_id, outcome, reason, None, result)
            else:
                out[i] = h = Handled(jobs[i].event_id, outcome, reason, result)
            count(self.tally, jobs[i], h)
        return [h for h in out if h is not None]

    def release(self, jobs: Sequence[Job]) -> Steps[list[Handled]]:
        """Give the jobs back unstarted: ready at once, their attempts unspent."""
        return (yield from self.settle(jobs, [RELEASE] * len(jobs))) if jobs else []

    def left_ahead(self) -> list[Lease]:
        """The leases claimed ahead that no round took (a run stopped with some kept), counted
        claimed: the driver releases them."""
        left: list[Lease] = self._ahead.left() if self._ahead is not None else []
        self.tally.add("claimed", len(left))
        return left

    # -- the loop ----------------------------------------------------------------

    def loop(self, mode: str | None, stopping: Callable[[], bool], step: Callable[[], Any],
             pause: Callable[[float], Any], recover: Callable[[Unavailable, int, float], Any]) -> Steps[bool]:
        """One of the run's rounds after another until stopping(); True when the stop mode
        was reached (the driver stops the run). Idle rounds back off from idle_min, doubling
        to idle_max (straight to idle_max when pause() listened for new work); a round that
        meets Unavailable calls recover(error, reconnections when it began, pause) and backs
        off alike. step() is the driver's round; pause(seconds) -> listened."""
        idle_min, idle_max = self.settings.idle_min, self.settings.idle_max
        wait = idle_min
        while not stopping():
            yield from self._tick_if_due()
            reconnects = self._reconnects()
            try:
                handled, done = yield from self._round(mode, step)
            except Unavailable as exc:
                yield (recover, (exc, reconnects, wait))
                wait = min(wait * 2, idle_max)
                continue
            if done:
                return True
            if handled:
                wait = idle_min
            elif (yield (pause, (wait,))):
                wait = idle_max  # a notification ends the wait: no need to poll sooner
            else:
                wait = min(wait * 2, idle_max)
        return False

    def _round(self, mode: str | None, step: Callable[[], Any]) -> Steps[tuple[list[Handled], bool]]:
        """One round: (what it handled, as _worked() counts it; whether the stop mode is reached)."""
        with self._lock:
            self._active += 1
            seen = self._busy_rounds
        handled: list[Handled] = []
        try:
            handled = self._worked((yield (step, ())))
        finally:
            idle = self.end_round(handled, seen)
        return handled, (yield from self._stop_mode_reached(handled, idle, mode))

    def _worked(self, handled: list[Handled]) -> list[Handled]:
        """What a round handled, for backoff and stop modes. A round that only gave events
        back (released: kinds this worker has no task for) counts as work the first time, so
        the run goes on to other heads; once it meets only events released already since the
        last round that did work, the rotation has come back to them: it counts as idle."""
        if not handled or any(h.outcome is not Outcome.RELEASE for h in handled):
            if handled:
                with self._lock:
                    self._released.clear()
            return handled
        ids = {h.event_id for h in handled}
        with self._lock:
            again = ids <= self._released
            self._released |= ids
        return [] if again else handled

    def end_round(self, handled: Sequence[Handled], seen: int) -> bool:
        """A round begun when `seen` rounds had handled something ends; True when it was idle:
        empty, no round is inside its step and none handled anything since this one began
        (a settle meanwhile may have made work claimable)."""
        with self._lock:
            self._active -= 1
            if handled:
                self._busy_rounds += 1
            return not handled and self._active == 0 and self._busy_rounds == seen

    def _stop_mode_reached(self, handled: Sequence[Handled], idle: bool, mode: str | None) -> Steps[bool]:
        """until_idle: an idle round (in a worker process, also with no event inflight: a
        sibling's settle may make work claimable). until_empty: an empty round once every
        flow's head is quarantined or the flow is gone."""
        if handled or mode is None:
            return False
        if mode == "until_idle":
            if idle and self.idle_needs_no_inflight:
                return bool((yield (self._stats, ())).counts[State.INFLIGHT.value] == 0)
            return idle
        return only_quarantined_left((yield (self._stats, ())))

    def _tick_if_due(self) -> Steps[None]:
        """With tick=True, turn due schedule slots into events, at most once per idle_max
        (whichever round comes first); a failed tick is logged, never raised."""
        if self._tick is None:
            return
        with self._lock:
            now = self._clock()
            if now < self._next_tick:
                return
            self._next_tick = now + self.settings.idle_max
        try:
            made = yield (self._tick, ())
        except FairqError as exc:
            log_tick_failed(exc)
            return
        log_tick(made)
