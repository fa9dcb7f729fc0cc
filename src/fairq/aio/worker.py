"""AsyncWorker: coroutine handlers as tasks on one event loop, with fairq.Worker's outcomes.

A round claims up to `batch` events, runs the handler on each in turn (a
task, under the timeout, while a heartbeat task extends the batch's leases)
and settles them in one settle_many; `concurrency` rounds run at once.
Whatever the queue raises propagates and is never a retry; a heartbeat's
queue error is raised after its batch is settled. Once its handlers are
done, a batch's settle is written even if the round is cancelled meanwhile
(the stop timeout). run() stops on SIGINT /
SIGTERM (loop.add_signal_handler), on stop(), or in a stop mode (until_idle,
until_empty), as Worker.run does, and waits out Unavailable as it does
(fairq.worker.outage); its idle waits and back-offs run on a thread of the
run's own (fairq.aio.waits). What a round and a run decide is the worker
core's (fairq.worker.core), as for fairq.Worker; this module awaits the
calls the core asks for and runs handlers as tasks. No SQL, no policy here.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..errors import InvalidInput
from ..worker import Handled, Job
from ..worker.ahead import AsyncClaimAhead
from ..worker.core import Call, Core, Steps
from ..worker.job import RELEASE, Decision, result_limit
from ..worker.outage import Outage
from ..worker.settings import check_settings
from ..worker.signals import exit_now, first_note
from ..worker.stops import stop_mode
from ..worker.together import AsyncSettleTogether
from ..worker.verbs import REQUIRED, waiter
from ..tasks import Tasks, check_tasks, check_unknown
from ._thread import completing
from .heartbeat import LoopWatch, beat
from .job import AsyncJob, check_async_handler, ended, run_handler
from .tasks import TaskRunner
from .waits import Waits

log = logging.getLogger("fairq.worker")

R = TypeVar("R")


async def drive(steps: Steps[R]) -> R:
    """Run a piece of the worker core by awaiting each call it yields (fairq.worker.core.drive's twin)."""
    resume: Callable[[Any], Call] = steps.send
    answer: Any = None
    while True:
        try:
            fn, args = resume(answer)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]
        try:
            answer, resume = await fn(*args), steps.send
        except BaseException as exc:
            answer, resume = exc, steps.throw


class AsyncWorker:
    """Runs an async handler on claimed events: ``await step()`` does one round, ``await run()`` loops.

    queue: a fairq.aio.AsyncQueue or AsyncClient. handler: ``async def
    handle(job)``; it returns (ack) or raises fairq.Retry, fairq.Fail or
    anything else (retry). A plain function is refused (InvalidInput): use
    fairq.Worker. handler may be a fairq.Tasks: each job runs the task its kind
    names, an async task on the loop, a plain one on a thread of the worker's
    own (at most `concurrency` at once); a job of a kind it does not know is
    quarantined with reason "unknown_kind: NAME", or with unknown="release"
    given back unused (fairq.Tasks.dispatch). concurrency: rounds (so handlers) at once. batch, owner,
    lease_seconds, tick, stop_timeout, idle_min, idle_max, listen: as for fairq.Worker
    (idle rounds share one wait on one thread of the run's own, never the loop's default executor).
    timeout: seconds a handler may run; past it its task is cancelled and
    its event retried with reason "timeout". A lost lease (found by the
    heartbeat) sets job.lost and cancels the handler's task; nothing of it
    is settled (its Handled has outcome release, settled None, and `lost`).
    A handler must not block the loop: one that blocks it longer than the
    lease is logged ("loop.blocked") and its leases expire. With batch 1 and
    concurrency > 1, the rounds about to claim share one claim_many
    (fairq.worker.ahead); with concurrency > 1, the settles of rounds that
    finish together share one settle_many (fairq.worker.together).
    """

    def __init__(self, queue: Any, handler: Callable[[Job], Awaitable[Any]] | Tasks, *, owner: str | None = None,
                 concurrency: int = 1, batch: int = 1, lease_seconds: float | None = None,
                 timeout: float | None = None, tick: bool = False, stop_timeout: float = 30.0,
                 idle_min: float = 0.01, idle_max: float = 1.0, listen: bool = True,
                 unknown: str = "quarantine") -> None:
        for name, flag in (("tick", tick), ("listen", listen)):
            if not isinstance(flag, bool):
                raise InvalidInput(name, "must be True or False")
        for verb in REQUIRED + (("tick",) if tick else ()):
            if not asyncio.iscoroutinefunction(getattr(queue, verb, None)):
                raise InvalidInput("queue", f"must be a fairq.aio.AsyncQueue or AsyncClient (a "
                                            f"{type(queue).__name__} has no coroutine {verb}())")
        self.queue = queue
        self.unknown = check_unknown(unknown)
        self.handler = handler
        self._call: Callable[[Job], Awaitable[Any]]  # what each job runs: the handler, or a Tasks' runner
        if isinstance(handler, Tasks):
            check_tasks(handler, sync=False)
        else:
            self._call = check_async_handler(handler)
        settings = check_settings(owner, concurrency, batch, lease_seconds, timeout, stop_timeout, idle_min,
                                  idle_max, max_concurrency=65536, default_lease=lambda: float(queue.lease_seconds))
        (self.owner, self.concurrency, self.batch, self.lease_seconds, self.timeout, self.stop_timeout,
         self.idle_min, self.idle_max) = settings
        #: A Tasks' runner (its plain tasks' threads are closed when run() ends); None for a handler.
        self._tasks = TaskRunner(handler, self.unknown, self.concurrency) if isinstance(handler, Tasks) else None
        if self._tasks is not None:
            self._call = self._tasks
        self.tick = tick
        self.listen = listen
        self._waiter = waiter(getattr(queue, "sync", None)) if listen else None
        self._outage = Outage(getattr(queue, "sync", queue))  # reconnects the Queue an AsyncQueue runs
        self._stop = threading.Event()  # what Job.stopping reads
        self._wake: asyncio.Event | None = None  # set with _stop, for the run's waits
        self.watch: LoopWatch | None = None
        #: The rounds, claims, settles, stop modes and backoff; its calls are awaited here.
        self.core = Core(settings, queue, tick=tick, ahead=AsyncClaimAhead, together=AsyncSettleTogether,
                         reconnects=lambda: self._outage.reconnects)

    # -- one round -------------------------------------------------------------

    async def step(self) -> list[Handled]:
        """Claim up to `batch` events, run the handler on each, settle them; [] when idle.

        If the worker is stopping when a later job of the batch would start,
        that job is released. A cancelled step (run() past its stop timeout,
        or its caller cancelled): the running handler is cancelled and
        abandoned, as fairq.Worker abandons one (not settled: its lease runs
        out, and the claim that takes the event again records it expired, not
        as a handler failure; counted abandoned), finished jobs are settled as
        decided, unstarted ones released; then
        CancelledError. Once the handlers are done, the settle is written even
        if the step is cancelled while it waits for the database thread (then
        CancelledError follows it). A claim cancelled midway gives its leases back.
        """
        leases = await drive(self.core.claim())
        if not leases:
            return []
        jobs = [AsyncJob(lease, self._stop) for lease in leases]
        failures: list[BaseException] = []
        beating = asyncio.ensure_future(beat(self.queue, jobs, self.lease_seconds, failures))
        decisions: list[Decision] = []
        try:
            for i, job in enumerate(jobs):
                release = i > 0 and self._stop.is_set()
                decisions.append(RELEASE if release else await run_handler(self._call, job, self.timeout,
                                                                       result_limit(self.queue)))
        except asyncio.CancelledError:
            kept = self._cut_short(jobs, decisions)
            await completing(self._end_batch(beating, jobs[:kept] + jobs[kept + 1:], decisions))
            raise
        except BaseException:
            beating.cancel()
            raise
        handled = await completing(self._end_batch(beating, jobs, decisions))
        if failures:
            raise failures[0]
        return handled

    def _cut_short(self, jobs: Sequence[AsyncJob], decisions: list[Decision]) -> int:
        """The step was cancelled while the handler of jobs[len(decisions)] ran: decide the
        rest of the batch in `decisions`. That handler, unless it ended by itself meanwhile,
        is abandoned: left out of the settle, so its lease runs out. Later jobs are released.
        Returns the index of the abandoned job (len(jobs) if none was)."""
        running = len(decisions)
        decision = ended(jobs[running], result_limit(self.queue))
        if decision is None:
            self.core.tally.add("abandoned")
            log.warning("worker.abandoned event_id=%s", jobs[running].event_id)
            decisions += [RELEASE] * (len(jobs) - running - 1)
            return running
        decisions += [decision] + [RELEASE] * (len(jobs) - running - 1)
        return len(jobs)

    async def _end_batch(self, beating: asyncio.Future[None], jobs: Sequence[AsyncJob],
                         decisions: Sequence[Decision]) -> list[Handled]:
        """Stop the batch's heartbeat, then settle its jobs as decided."""
        beating.cancel()
        await asyncio.wait({beating})
        return await drive(self.core.settle(jobs, decisions))

    async def _release_left(self) -> None:
        """Give back the leases claimed ahead that no round took (its task was
        cancelled while it waited): ready at once, their attempts unspent."""
        left = [AsyncJob(lease, self._stop) for lease in self.core.left_ahead()]
        if left:
            await completing(drive(self.core.release(left)))

    # -- the loop ----------------------------------------------------------------

    async def run(self, until_idle: bool = False, *, until_empty: bool = False,
                  signals: bool = True) -> dict[str, int]:
        """Handle events until stopped, or in a stop mode (as Worker.run); returns counts().

        signals=True (on the main thread's loop): SIGINT or SIGTERM stops
        claiming; running handlers get `stop_timeout` seconds to finish and
        be settled, then are cancelled and abandoned (their leases run out).
        A second signal exits the process at once (status 128 + signal).
        Raises the first error the queue raised (Unavailable is waited out, reconnecting).
        """
        mode = stop_mode(until_idle, until_empty)
        loop = asyncio.get_running_loop()
        self._stop, self._wake = threading.Event(), asyncio.Event()
        waits = Waits(self._waiter, self._outage, self._stop, self._wake)  # on a thread of the run's own
        installed = []
        if signals and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, self._on_signal, signum)
                installed.append(signum)
        self.watch = LoopWatch(self.lease_seconds)
        self.watch.start()
        log.info("worker.start owner=%s concurrency=%d batch=%d lease_seconds=%s timeout=%s stop=%s async=True",
                 self.owner, self.concurrency, self.batch, self.lease_seconds, self.timeout, mode or "signal")
        rounds = [asyncio.ensure_future(self._loop(mode, waits)) for _ in range(self.concurrency)]
        try:
            await self._supervise(rounds)
            await self._release_left()
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
            self._stop.set()  # ends the waits still on the thread (a cancelled run)
            if self._tasks is not None:
                self._tasks.close()
            await waits.close()
            await self.watch.stop()
            self._stop = threading.Event()
        counts = self.counts()
        log.info("worker.stop %s", " ".join(f"{k}={n}" for k, n in counts.items()))
        for task in rounds:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return counts

    async def _supervise(self, rounds: list[asyncio.Task[None]]) -> None:
        """Wait for the rounds; once stopping, give them stop_timeout, then cancel them."""
        assert self._wake is not None
        stopping = asyncio.ensure_future(self._wake.wait())
        try:
            pending = set(rounds)
            while pending and not self._stop.is_set():
                await asyncio.wait(pending | {stopping}, return_when=asyncio.FIRST_COMPLETED)
                pending = {t for t in pending if not t.done()}
                if any(t.done() and not t.cancelled() and t.exception() is not None for t in rounds):
                    self.stop()
            if pending:
                _, pending = await asyncio.wait(pending, timeout=self.stop_timeout)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending)
        except asyncio.CancelledError:
            for task in rounds:
                task.cancel()
            await asyncio.wait(rounds)
            raise
        finally:
            stopping.cancel()

    async def _loop(self, mode: str | None, waits: Waits) -> None:
        """One round after another until stopping (the core's loop: idle rounds, and Unavailable,
        waited out and reconnected as fairq.Worker does, back off from idle_min to idle_max)."""
        if await drive(self.core.loop(mode, self._stop.is_set, self.step, waits.pause, waits.recover)):
            self.stop()

    def _on_signal(self, signum: int) -> None:
        """The first SIGINT / SIGTERM stops the worker gracefully; a second exits the process now."""
        if self._stop.is_set():
            exit_now(signum)
        first_note(signum, self.stop_timeout)
        log.info("worker.stopping signal=%s stop_timeout=%s", signal.Signals(signum).name, self.stop_timeout)
        self.stop()

    def stop(self) -> None:
        """Stop claiming; running handlers finish (within stop_timeout) and are settled. Call on the loop."""
        self._stop.set()
        if self._wake is not None:
            self._wake.set()

    def counts(self) -> dict[str, int]:
        """What this worker did so far; the keys are fairq.worker.COUNTS."""
        return self.core.tally.snapshot()
