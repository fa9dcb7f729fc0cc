"""Unit tests of handlers and tasks without threads, sleeps or a database to clean up.

queue() opens a private queue: an SQLite file in a temporary directory that
close() removes, on a model clock (ModelClock) that starts at START and moves
only when told. drain(q, tasks_or_handler) runs every job of a queue inline,
in the calling thread: claim one, run it, settle it with the decision a
worker would make (fairq.worker.handler.decide), and when nothing is
claimable move the time on to the next due time (a delay, a backoff, a
lease end, a tenant's next token), until nothing is left to claim. It
returns a Drained: the counts, every event's final state and the exceptions
each event's runs raised. Nothing here sleeps, starts a thread or writes SQL.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import tempfile
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _validate as v
from .api.queue import Queue
from .errors import InvalidInput, LeaseLost, UsageError
from .types import Lease, Outcome, Settled, State
from .worker.counts import COUNT_FOR, COUNTS
from .worker.handler import decide, is_async
from .worker.job import Decision, Job, result_limit

__all__ = ["START", "ModelClock", "PrivateQueue", "Drained", "queue", "drain"]

#: Where a private queue's model clock starts: 2026-01-01T00:00:00Z, in Unix seconds.
START = 1_767_225_600.0
#: The owner drain's claims are made as (what the audit and get().owner show).
OWNER = "fairq.testing"
#: Events read per page when drain looks for the next due time and the final states.
PAGE = 1_000


class ModelClock:
    """A clock that moves only when told: call it for the time (Unix seconds).

    A queue opened with ``clock=ModelClock()`` runs every call without `now=`
    at this time; `advance` and `set` move it forward, never back.
    """

    def __init__(self, start: float = START) -> None:
        self.now = v.seconds(start, "start")

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move the clock `seconds` (>= 0) forward; returns the new time."""
        return self.set(self.now + v.seconds(seconds, "seconds"))

    def set(self, now: float) -> float:
        """Move the clock to `now`, which must not be before the current time; returns it."""
        now = v.seconds(now, "now")
        if now < self.now:
            raise InvalidInput("now", f"{now!r} is before the clock's time {self.now!r}: a model clock never goes back")
        self.now = now
        return now


class PrivateQueue(Queue):
    """A fairq.Queue on a file of its own in a temporary directory, on a
    ModelClock (`clock`); close() (or leaving its ``with`` block) removes the
    directory. Made by fairq.testing.queue()."""

    clock: ModelClock
    directory: Path

    def __init__(self, directory: Path, clock: ModelClock, **queue_kwargs: Any) -> None:
        self.directory, self.clock = directory, clock
        # Removed when the queue is closed, or else when it is collected or the interpreter exits.
        self._remove = weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)
        try:
            super().__init__(directory / "queue.db", clock=clock, **queue_kwargs)
        except BaseException:
            self._remove()
            raise

    def __enter__(self) -> PrivateQueue:
        return self

    def close(self) -> None:
        """Close the connection and remove the queue's temporary directory (and its file)."""
        try:
            super().close()
        finally:
            self._remove()


def queue(*, start: float = START, **queue_kwargs: Any) -> PrivateQueue:
    """A private fairq.Queue for a test: a new SQLite file in a temporary
    directory that close() removes, on a ModelClock starting at `start`
    (default START, 2026-01-01T00:00:00Z), reachable as ``q.clock``.

    queue_kwargs go to fairq.Queue (lease_seconds, max_attempts, backoff,
    max_body_bytes, ...); synchronous defaults to "normal" (nothing here
    needs to survive a power loss). The path and the clock are the
    function's own: giving either is refused (InvalidInput).
    """
    for own in ("path", "clock"):
        if own in queue_kwargs:
            raise InvalidInput(own, "fairq.testing.queue() makes its own (a temporary file on a model clock; "
                                    "start= sets the clock's first time)")
    clock = ModelClock(start)
    queue_kwargs.setdefault("synchronous", "normal")
    directory = Path(tempfile.mkdtemp(prefix="fairq-testing-"))
    return PrivateQueue(directory, clock, **queue_kwargs)


@dataclass(frozen=True)
class Drained:
    """What drain() did.

    counts: the worker's counts (fairq.Worker.counts() keys: claimed, acked,
    retried, released, quarantined, lost, abandoned). states: the state of
    every event in the queue when drain returned. errors: for each event whose
    runs raised, every exception raised, in order (fairq.Retry and fairq.Fail
    included; a result too big or not JSON is no exception: its event is
    quarantined as bad_result, as a worker does).
    now: the queue time drain reached.
    """

    counts: dict[str, int]
    states: dict[str, State]
    errors: dict[str, list[BaseException]] = field(default_factory=dict)
    now: float = START


def drain(q: Queue, tasks_or_handler: Any, *, max_jobs: int = 10_000) -> Drained:
    """Run every job of `q` inline, in the calling thread, until nothing is left to claim.

    tasks_or_handler: a task registry (fairq.Tasks: anything with a
    ``dispatch`` method, which runs the task named by the job's kind) or a
    handler of one Job, plain or async (an async handler or task runs with
    asyncio.run, so drain must not be called from a running event loop:
    UsageError). Each job is decided as a worker decides it: a return is an
    ack, with the value as the event's result when it is not None; Retry and
    Fail are theirs; any other exception is a retry (its reason the
    exception's type and message). When nothing is claimable, the time
    moves on to the earliest time something waits for (a delay, a backoff, a
    lease's end, a tenant's next token), and drain goes on; it returns once
    nothing waits. Events blocked for an operator (behind a quarantined
    head, in a paused flow) stay as they are.

    Time: on a fairq.testing queue its ModelClock is moved (a job runs at
    the time it was claimed); on any other queue every call passes now=, so
    it must accept times ahead of its clock (a callable clock, or
    max_clock_skew=None). A job's timeout is not enforced: a handler runs to
    its end. Schedules are not ticked.

    max_jobs: at most this many jobs are run; one more claimable job is
    released and raises UsageError (a handler that retries forever, or
    releases).
    """
    max_jobs = v.count(max_jobs, "max_jobs", low=1, high=10**9)
    run = _runner(tasks_or_handler)
    clock = q.clock if isinstance(q, PrivateQueue) else None
    now = clock() if clock is not None else q.stats().now
    counts = dict.fromkeys(COUNTS, 0)
    errors: dict[str, list[BaseException]] = {}
    jobs = 0
    while True:
        lease = q.claim(owner=OWNER, now=now)
        if lease is None:
            due = _next_due(q, now)
            if due is None:
                break
            now = clock.set(due) if clock is not None else due
            continue
        if jobs == max_jobs:
            q.release(lease, now=now)
            raise UsageError(f"max_jobs: drain ran {max_jobs} jobs and more are claimable "
                             f"(a handler that retries or releases forever?); pass a larger max_jobs")
        jobs += 1
        counts["claimed"] += 1
        kept = errors.setdefault(lease.event_id, [])
        _settle(q, lease, _run(q, run, lease, kept), counts, now)
    return Drained(counts=counts, states=_states(q), errors={k: e for k, e in errors.items() if e}, now=now)


def _runner(tasks_or_handler: Any) -> Callable[[Job], Any]:
    """The one call that runs a job: the registry's dispatch or the handler (async ones under asyncio.run)."""
    dispatch = getattr(tasks_or_handler, "dispatch", None)
    if callable(dispatch) and not inspect.isroutine(tasks_or_handler):  # a registry, not a singledispatch function
        tasks: Iterable[Any] = tasks_or_handler
        if any(getattr(task, "is_async", False) for task in tasks):
            _check_no_loop("a task registry with async tasks")
        return lambda job: _awaited(dispatch(job))
    if not callable(tasks_or_handler):
        raise InvalidInput("tasks_or_handler", f"must be a task registry (fairq.Tasks) or a handler of one Job, "
                                               f"not {type(tasks_or_handler).__name__}")
    if is_async(tasks_or_handler):
        _check_no_loop("an async handler")
    return lambda job: _awaited(tasks_or_handler(job))


def _check_no_loop(what: str) -> None:
    """Refuse (UsageError) to run coroutines with asyncio.run inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"drain runs {what} with asyncio.run, which cannot run inside an event loop: call it "
                     f"from sync code, or in a thread (await asyncio.to_thread(fairq.testing.drain, q, ...))")


def _awaited(value: Any) -> Any:
    """The value, or what it resolves to if it is awaitable (run to its end with asyncio.run)."""
    if inspect.isawaitable(value):
        return asyncio.run(_await(value))
    return value


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _run(q: Queue, run: Callable[[Job], Any], lease: Lease, errors: list[BaseException]) -> Decision:
    """Run one job and decide it as a worker does (decide(): a result that is not JSON or too big
    for the queue quarantines the event as bad_result); every exception its run raised is kept in `errors`."""

    def kept(job: Job) -> Any:
        try:
            return run(job)
        except Exception as exc:
            errors.append(exc)
            raise

    return decide(kept, Job(lease, threading.Event()), max_bytes=result_limit(q))


def _settle(q: Queue, lease: Lease, decided: Decision, counts: dict[str, int], now: float) -> None:
    """Settle one job as decided (an ack with its result when there is one), and count what became of it."""
    outcome, reason, delay, result = decided
    settled: Settled
    try:
        if result is None:
            settled = q.settle(lease, outcome, reason=reason, delay=delay, now=now)
        else:
            settled = q.ack(lease, result=result, now=now)
    except LeaseLost:
        counts["lost"] += 1
        return
    counts["released" if outcome is Outcome.RELEASE else COUNT_FOR[settled.state]] += 1


def _next_due(q: Queue, now: float) -> float | None:
    """The earliest time after `now` at which something may become claimable: a ready
    event's next_at (a delay or a backoff), an inflight event's lease end, a tenant's
    limit lifting; None when nothing waits for a time (only operators' work is left)."""
    times = [e.next_at for e in _all_events(q, State.READY) if e.next_at is not None and e.next_at > now]
    times += [e.lease_until for e in _all_events(q, State.INFLIGHT)
              if e.lease_until is not None and e.lease_until > now]
    after: str | None = None
    while page := q.tenants(after=after, limit=PAGE, now=now):
        times += [t.until for t in page if t.until is not None and t.until > now]
        after = page[-1].name
    return min(times, default=None)


def _all_events(q: Queue, state: State | None = None) -> Iterable[Any]:
    """Every event (in `state`, if given), a page at a time."""
    after: str | None = None
    while page := q.events(state=state, limit=PAGE, after=after):
        yield from page
        after = page[-1].event_id


def _states(q: Queue) -> dict[str, State]:
    """Every event's state now."""
    return {e.event_id: e.state for e in _all_events(q)}
