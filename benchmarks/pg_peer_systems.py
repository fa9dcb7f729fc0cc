"""The systems benchmarks/pg_peers.py runs: fairq, procrastinate, PgQueuer and oban, each through its own worker.

Each system, in a fresh database of its own, has:

  fill(url, jobs)   enqueue `jobs` no-op jobs numbered 0..jobs-1 (before the
                    clock), through the system's own enqueue API, then ANALYZE;
  work(url, opts, barrier) -> Seen
                    one worker process: build the system's worker as its
                    documentation shows, wait on the barrier, run it until
                    the queue is empty; returns the job numbers its no-op
                    handler saw (oban has `workers` instead: its processes
                    run in another interpreter, benchmarks/pg_peer_oban.py);
  done_sql          SQL counting the jobs finished, in the system's own tables
                    (the parent polls it to stop the clock);
  check(url, jobs)  what is wrong with the tables afterwards, or None when
                    every job finished exactly once.

How each worker runs and stops (no-op handlers, in the form each system runs
natively: a plain function for fairq.Worker, a coroutine for the two others):

  fairq          fairq.Worker(q, handler, concurrency=c, batch=b).run(until_empty=True,
                 signals=False): threads, returns once nothing is ready or inflight.
                 Jobs are spread over 100 flows (fairq leases one event per flow at a time).
  procrastinate  App(connector=PsycopgConnector(conninfo=url)), a task named "noop",
                 app.run_worker_async(wait=False, concurrency=c, install_signal_handlers=False):
                 returns at its first fetch that finds nothing. Its psycopg pool holds
                 max(4, c + 2) connections (psycopg_pool's default is 4), so a worker of
                 concurrency 8 is not held back by its pool.
  PgQueuer       QueueManager(Queries(PsycopgDriver(conn))) on one autocommit psycopg
                 AsyncConnection (asyncpg is not installed), an entrypoint "noop",
                 qm.run(mode=QueueExecutionMode.drain, batch_size=b) (pgqueuer_options):
                 returns once nothing is queued and its tasks are done (completions are
                 buffered and written before it returns).
  oban           (oban-py) in its own interpreter, Python >= 3.12 (pg_peer_oban.py): in each
                 process Oban(pool=Oban.create_pool(url, min_size=4), queues={"default": c})
                 and a @worker class "Noop"; oban.start() when released, oban.stop() once the
                 parent has seen every job completed (oban has no mode that returns when the
                 queue is empty). Its polling and notification settings are its defaults.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pg_drain
import pg_peer_oban

CHUNK = 1_000  # jobs per enqueue call while filling


@dataclass(frozen=True)
class System:
    name: str  # the row's label
    package: str  # the distribution whose version is shown ("" for fairq)
    fill: Callable[[str, int], None]
    work: Callable[[str, dict[str, Any], Any], Seen] | None  # None: `workers` runs it
    done_sql: str
    check: Callable[[str, int], str | None]
    options: Callable[[int], dict[str, Any]] = field(default=lambda c: {"concurrency": c})
    # (url, options, processes) -> its worker processes, when they run outside this interpreter
    workers: Callable[[str, dict[str, Any], int], Any] | None = None


class Seen(list[int]):
    """The job numbers a process's handlers saw, and when the first one ran (monotonic)."""

    first = 0.0

    def add(self, number: int) -> None:
        if not self:
            self.first = time.monotonic()
        self.append(number)


def version(system: System) -> str:
    if system is OBAN:
        found = pg_peer_oban.probe()
        return "" if isinstance(found, str) else found[1]
    return importlib.metadata.version(system.package) if system.package else ""


def count(url: str, sql: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute(sql).fetchone()[0])  # type: ignore[index]


def problems(url: str, checks: dict[str, tuple[str, int]]) -> str | None:
    """The first check whose count is not the one expected: 'what: got N, expected M'."""
    for what, (sql, expected) in checks.items():
        got = count(url, sql)
        if got != expected:
            return f"{what}: {got}, expected {expected}"
    return None


# -- fairq ---------------------------------------------------------------------------


def fairq_fill(url: str, jobs: int) -> None:
    pg_drain.fill_fairq(url, jobs)  # enqueue_many over 100 flows, body {"i": i}; ANALYZE


def fairq_work(url: str, opts: dict[str, Any], barrier: Any) -> Seen:
    import fairq

    seen = Seen()
    with fairq.Queue(url) as q:
        worker = fairq.Worker(q, lambda job: seen.add(job.body["i"]), **opts)
        barrier.wait()
        worker.run(until_empty=True, signals=False)
    return seen


def fairq_check(url: str, jobs: int) -> str | None:
    return problems(url, {
        "events": ("SELECT count(*) FROM event", jobs),
        "acked events": ("SELECT count(*) FROM event WHERE state = 'acked'", jobs),
        "events claimed other than once": ("SELECT count(*) FROM event WHERE lifetime_attempts <> 1", 0),
    })


# -- procrastinate ---------------------------------------------------------------------


def procrastinate_app(url: str, concurrency: int, handler: Callable[..., Any]) -> Any:
    import procrastinate

    size = max(4, concurrency + 2)  # the jobs running, the fetch, the LISTEN connection
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, min_size=size, max_size=size))
    app.task(name="noop")(handler)
    return app


async def _procrastinate_noop(i: int) -> None:
    pass


def procrastinate_fill(url: str, jobs: int) -> None:
    async def fill() -> None:
        app = procrastinate_app(url, 1, _procrastinate_noop)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            task = app.tasks["noop"]
            for start in range(0, jobs, CHUNK):
                await task.batch_defer_async(*[{"i": i} for i in range(start, min(jobs, start + CHUNK))])

    asyncio.run(fill())
    pg_drain.analyze(url)


def procrastinate_work(url: str, opts: dict[str, Any], barrier: Any) -> Seen:
    seen = Seen()

    async def noop(i: int) -> None:
        seen.add(i)

    async def main() -> None:
        app = procrastinate_app(url, opts["concurrency"], noop)
        async with app.open_async():  # the pool's connections are opened here, before the clock
            barrier.wait()
            await app.run_worker_async(wait=False, install_signal_handlers=False, **opts)

    asyncio.run(main())
    return seen


def procrastinate_check(url: str, jobs: int) -> str | None:
    return problems(url, {
        "jobs": ("SELECT count(*) FROM procrastinate_jobs", jobs),
        "succeeded jobs": ("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'", jobs),
        "jobs finished other than once": ("SELECT count(*) FROM procrastinate_jobs WHERE attempts <> 1", 0),
        "'started' events": ("SELECT count(*) FROM procrastinate_events WHERE type = 'started'", jobs),
        "jobs started": ("SELECT count(DISTINCT job_id) FROM procrastinate_events WHERE type = 'started'", jobs),
    })


# -- PgQueuer --------------------------------------------------------------------------


def pgqueuer_fill(url: str, jobs: int) -> None:
    async def fill() -> None:
        import psycopg
        from pgqueuer import PsycopgDriver, Queries

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            queries = Queries(PsycopgDriver(conn))
            await queries.install()
            for start in range(0, jobs, CHUNK):
                n = min(jobs, start + CHUNK) - start
                await queries.enqueue(["noop"] * n, [str(i).encode() for i in range(start, start + n)], [0] * n)

    asyncio.run(fill())
    pg_drain.analyze(url)


def pgqueuer_options(concurrency: int) -> dict[str, Any]:
    """Concurrency 1: its defaults (batch_size 10, no cap on running tasks: it dequeues up
    to 10 jobs a round and runs them at once). c > 1: batch_size c, no cap. (Capping
    running tasks at c, max_concurrent_tasks=c, allows batches of c / 2 only, and its
    dequeue then also counts the worker's picked jobs: about a third slower at c = 8
    when tried, so the faster setting is the one measured.)"""
    if concurrency == 1:
        return {}
    return {"batch_size": concurrency}


def pgqueuer_work(url: str, opts: dict[str, Any], barrier: Any) -> Seen:
    seen = Seen()

    async def main() -> None:
        import psycopg
        from pgqueuer import PsycopgDriver, Queries, QueueManager
        from pgqueuer.types import QueueExecutionMode

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            qm = QueueManager(Queries(PsycopgDriver(conn)))

            @qm.entrypoint("noop")
            async def noop(job: Any) -> None:
                seen.add(int(job.payload))

            barrier.wait()
            await qm.run(mode=QueueExecutionMode.drain, **opts)

    asyncio.run(main())
    return seen


def pgqueuer_check(url: str, jobs: int) -> str | None:
    return problems(url, {
        "jobs left in pgqueuer": ("SELECT count(*) FROM pgqueuer", 0),
        "'successful' log rows": ("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'", jobs),
        "jobs logged successful": ("SELECT count(DISTINCT job_id) FROM pgqueuer_log WHERE status = 'successful'",
                                   jobs),
        "log rows of other outcomes": ("SELECT count(*) FROM pgqueuer_log "
                                       "WHERE status NOT IN ('queued', 'picked', 'successful')", 0),
    })


# -- oban (oban-py) ---------------------------------------------------------------------


def oban_fill(url: str, jobs: int) -> None:
    pg_peer_oban.run_fill(url, jobs)  # oban.schema.install, then Oban.enqueue_many of {"i": i}
    pg_drain.analyze(url)


def oban_options(concurrency: int) -> dict[str, Any]:
    return {"limit": concurrency}  # the queue's limit: jobs one process runs at once


def oban_workers(url: str, opts: dict[str, Any], processes: int) -> pg_peer_oban.Workers:
    return pg_peer_oban.Workers(url, opts["limit"], processes)


def oban_check(url: str, jobs: int) -> str | None:
    return problems(url, {
        "jobs": ("SELECT count(*) FROM oban_jobs", jobs),
        "completed jobs": ("SELECT count(*) FROM oban_jobs WHERE state = 'completed'", jobs),
        "jobs attempted other than once": ("SELECT count(*) FROM oban_jobs WHERE attempt <> 1", 0),
        "jobs with errors recorded": ("SELECT count(*) FROM oban_jobs WHERE errors <> '[]'::jsonb", 0),
        "distinct job numbers": ("SELECT count(DISTINCT args->>'i') FROM oban_jobs", jobs),
    })


def oban_how() -> str:
    """How oban was run, or why it was not."""
    found = pg_peer_oban.probe()
    if isinstance(found, str):
        return f"oban: skipped: {found}"
    exe, release, py = found
    return (f"oban (oban-py) {release} runs in its own interpreter, Python {py} ({exe}), embedded through its "
            f"library API under asyncio.run: per process Oban(pool=Oban.create_pool(url, min_size="
            f"{pg_peer_oban.POOL_MIN}), queues={{'default': limit}}), limit 1 in the process columns and 8 in "
            "the concurrency column; polling and notification at oban's defaults; started together over pipes "
            "(oban.start() when released), stopped with oban.stop() once the parent saw every job completed.")


# -- the systems ---------------------------------------------------------------------

FAIRQ_DONE = "SELECT count(*) FROM event WHERE state = 'acked'"
FAIRQ = System("fairq", "", fairq_fill, fairq_work, FAIRQ_DONE, fairq_check)
FAIRQ_BATCH = System("fairq, batch 10", "", fairq_fill, fairq_work, FAIRQ_DONE, fairq_check,
                     options=lambda c: {"concurrency": c, "batch": 10})
PROCRASTINATE = System("procrastinate", "procrastinate", procrastinate_fill, procrastinate_work,
                       "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'", procrastinate_check)
PGQUEUER = System("PgQueuer", "pgqueuer", pgqueuer_fill, pgqueuer_work,
                  "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'", pgqueuer_check,
                  options=pgqueuer_options)
OBAN = System("oban", "oban", oban_fill, None, "SELECT count(*) FROM oban_jobs WHERE state = 'completed'",
              oban_check, options=oban_options, workers=oban_workers)
PEERS = (PROCRASTINATE, PGQUEUER, OBAN)
BY_NAME = {s.name: s for s in (FAIRQ, FAIRQ_BATCH, *PEERS)}


def missing(system: System) -> str | None:
    """Why a peer cannot run here (its package does not import), or None."""
    if system is OBAN:
        found = pg_peer_oban.probe()
        return found if isinstance(found, str) else None
    if not system.package:
        return None
    try:
        __import__(system.package)
    except ImportError as exc:
        return f"not importable ({exc}); install it with: python3 -m pip install {system.package}"
    return None


def child(name: str, url: str, opts: dict[str, Any], barrier: Any, results: Any) -> None:
    """A spawned worker process: one system's worker until the queue is empty; reports
    ("ok", job numbers seen, monotonic time it returned, time its first job ran) or ("error", message)."""
    try:
        work = BY_NAME[name].work
        assert work is not None
        seen = work(url, opts, barrier)
        results.put(("ok", list(seen), time.monotonic(), seen.first))
    except BaseException as exc:
        barrier.abort()  # a process that fails before the barrier must not leave the others waiting
        results.put(("error", f"{name}: {type(exc).__name__}: {exc}", 0.0, 0.0))
        raise
