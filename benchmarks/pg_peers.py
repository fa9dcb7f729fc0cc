"""fairq beside its Python peers on PostgreSQL (procrastinate, PgQueuer, oban): no-op jobs drained by each
system's own worker, on one server, in one run. The `peers` section of benchmarks/postgres.py:

    python3 benchmarks/postgres.py --only peers --repeat 3      # 2,000 jobs a run
    python3 benchmarks/postgres.py --only peers --quick         # 200 jobs, 1 run per cell

Never part of the default sections, nor of the tests. A cell is a worker layout: 1, 4 or 8 worker
processes of concurrency 1, or one process of concurrency 8. For each cell and each run, every
system in turn (interleaved, so the machine's noise falls on all of them alike):

1. gets a fresh database on the server and is filled with the same number of no-op jobs through
   its own enqueue API, then ANALYZE; nothing of this is timed;
2. `processes` spawned processes each build the system's own worker (benchmarks/pg_peer_systems.py
   says how each runs and stops), open their connections, and wait on a barrier; oban's processes
   run in an interpreter of their own (Python >= 3.12, benchmarks/pg_peer_oban.py) and wait on
   their pipes instead: each says "ready", and the parent writes "go" to each once all have;
3. the clock starts when the parent passes the barrier (oban: has written the last "go") and stops
   when the parent, polling the system's own tables every 10 ms, sees every job finished (fairq:
   acked; procrastinate: succeeded; PgQueuer: logged successful; oban: completed); oban's
   processes, which do not stop by themselves, are then told to stop;
4. afterwards every job number was seen by a handler exactly once (the handlers' lists, gathered
   from the processes) and the system's tables agree; anything else fails the run loudly.

jobs/s = jobs ÷ that time; a cell's figure is the median of --repeat runs. A second table times
the same runs from the first job any handler ran, leaving out each worker's start-up inside the
clock (PgQueuer checks its schema and opens its listener first: up to ~0.3 s with 8 processes). "fairq ÷ best peer":
fairq's default worker (batch 1) over the fastest peer in that column; "fairq, batch 10 ÷ best
peer": the same for fairq.Worker(batch=10), the like of PgQueuer's default batches of 10. A peer whose package does
not import is skipped, saying why (oban: when no Python >= 3.12 with oban installed is found).
"""

from __future__ import annotations

import collections
import functools
import multiprocessing
import statistics
import sys
import time
from typing import Any

import pg_peer_systems as systems
import pgops

SPAWN = multiprocessing.get_context("spawn")
CELLS = ((1, 1), (4, 1), (8, 1), (1, 8))  # (processes, concurrency per process)
POLL = 0.01  # seconds between the parent's counts of finished jobs
START = 300.0  # seconds the processes may take to reach the barrier
HUNG = 1800.0  # seconds a drain may take before it is declared hung (a guard, not a measure)


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def label(processes: int, concurrency: int) -> str:
    if concurrency > 1:
        return f"{processes} proc × concurrency {concurrency}"
    return f"{processes} proc" + ("s" if processes > 1 else "")


class Spawned:
    """`processes` spawned processes of this interpreter, each running the system's `work`, held at a barrier."""

    def __init__(self, system: systems.System, url: str, opts: dict[str, Any], processes: int) -> None:
        self.name = system.name
        self.barrier = SPAWN.Barrier(processes + 1)
        self.results: Any = SPAWN.Queue()
        self.procs = [SPAWN.Process(target=systems.child, args=(system.name, url, opts, self.barrier, self.results),
                                    daemon=True) for _ in range(processes)]
        for p in self.procs:
            p.start()

    def start(self, timeout: float) -> None:
        try:
            self.barrier.wait(timeout=timeout)
        except Exception:
            raise RuntimeError(f"{self.name}: a worker process failed to start: {self.error()}") from None

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.procs)

    def exitcodes(self) -> list[int | None]:
        return [p.exitcode for p in self.procs]

    def finish(self, timeout: float) -> list[tuple[str, list[int], float, float]]:
        outs = [self.results.get(timeout=timeout) for _ in self.procs]
        errors = [o[1] for o in outs if o[0] == "error"]
        if errors:
            raise RuntimeError(errors[0])
        return outs

    def error(self) -> str:
        try:
            return str(self.results.get(timeout=5)[1])
        except Exception:
            return "no message (the barrier timed out)"

    def close(self) -> None:
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()


def drain(server: str, system: systems.System, jobs: int, processes: int, concurrency: int) -> dict[str, Any]:
    """One run: a fresh database, filled, drained by `processes` worker processes; the figures."""
    import psycopg

    with pgops.fresh_database(server, prefix="peers") as url:
        system.fill(url, jobs)
        opts = system.options(concurrency)
        workers = (system.workers or functools.partial(Spawned, system))(url, opts, processes)
        try:
            with psycopg.connect(url, autocommit=True) as poll:
                workers.start(timeout=START)
                began = time.monotonic()
                try:
                    ended = wait_done(poll, system, jobs, workers, began)
                except RuntimeError as exc:
                    raise RuntimeError(f"{exc}; a process said: {workers.error()}") from None
            outs = workers.finish(timeout=HUNG)
        finally:
            workers.close()
        verify(url, system, jobs, [o[1] for o in outs])
    seconds, first = ended - began, min(o[3] for o in outs if o[1]) - began
    return {"jobs_per_s": jobs / seconds, "from_first_job_per_s": jobs / (seconds - first), "seconds": seconds,
            "first_job_s": first, "workers_returned_s": max(o[2] for o in outs) - began, "options": opts}


def wait_done(poll: Any, system: systems.System, jobs: int, workers: Any, began: float) -> float:
    """Poll the system's finished-job count until it reaches `jobs`; the monotonic time it did."""
    while True:
        done = int(poll.execute(system.done_sql).fetchone()[0])
        now = time.monotonic()
        if done >= jobs:
            return now
        if now - began > HUNG:
            raise RuntimeError(f"{system.name}: {done} of {jobs} jobs finished after {HUNG:.0f} s")
        if not workers.alive():
            raise RuntimeError(f"{system.name}: every worker process returned with {done} of {jobs} jobs "
                               f"finished (exit codes {workers.exitcodes()})")
        time.sleep(POLL)


def verify(url: str, system: systems.System, jobs: int, seen: list[list[int]]) -> None:
    """Every job ran exactly once: by the handlers' own lists and by the system's tables."""
    counts = collections.Counter(i for part in seen for i in part)
    twice = sorted(i for i, n in counts.items() if n > 1)
    never = sorted(set(range(jobs)) - counts.keys())
    if twice or never or len(counts) != jobs:
        raise RuntimeError(f"{system.name}: handlers ran {sum(counts.values())} times for {jobs} jobs; "
                           f"more than once: {twice[:10]}, never: {never[:10]}")
    wrong = system.check(url, jobs)
    if wrong is not None:
        raise RuntimeError(f"{system.name}: after the drain, {wrong}")


def run(server: str, jobs: int, repeat: int, results: dict[str, Any]) -> None:
    """The section: every cell, `repeat` interleaved runs of each system; prints the table."""
    skipped = {s.name: why for s in systems.PEERS if (why := systems.missing(s)) is not None}
    measured = [systems.FAIRQ, systems.FAIRQ_BATCH] + [s for s in systems.PEERS if s.name not in skipped]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s.name: {} for s in measured}
    for processes, concurrency in CELLS:
        cell = label(processes, concurrency)
        for _ in range(repeat):
            for system in measured:
                runs[system.name].setdefault(cell, []).append(drain(server, system, jobs, processes, concurrency))
        progress(f"peers, {cell}: " + ", ".join(
            f"{s.name} {statistics.median(r['jobs_per_s'] for r in runs[s.name][cell]):,.0f}/s" for s in measured))
    table, warm = ({name: {cell: statistics.median(r[key] for r in cells[cell]) for cell in cells}
                    for name, cells in runs.items()} for key in ("jobs_per_s", "from_first_job_per_s"))
    versions = {s.name: systems.version(s) for s in measured}
    results["peers"] = {"jobs": jobs, "repeat": repeat, "jobs_per_s": table, "from_first_job_per_s": warm,
                        "runs": runs, "versions": versions, "skipped": skipped,
                        "oban": systems.oban_how()}
    print(f"\n## fairq and its Python peers, {jobs:,} no-op jobs, each system's own worker\n",
          f"jobs/s from the barrier to the last job finished, median of {repeat} run(s) per cell", "",
          *rows(table, versions), "",
          "the same runs, timed from the first job a handler ran (each worker's start-up left out)", "",
          *rows(warm, versions), "", *notes(table, skipped), sep="\n")


def rows(table: dict[str, dict[str, float]], versions: dict[str, str]) -> list[str]:
    """A markdown table: one row per system, one column per cell, and each fairq row ÷ the best peer."""
    cells = [label(p, c) for p, c in CELLS]
    lines = ["| system | " + " | ".join(cells) + " |", "|---|" + "---:|" * len(cells)]
    for name, row in table.items():
        shown = f"{name} {versions[name]}".strip()
        lines.append(f"| {shown} | " + " | ".join(f"{row[c]:,.0f}" for c in cells) + " |")
    peers = [name for name in table if name in {s.name for s in systems.PEERS}]
    for ours in (systems.FAIRQ.name, systems.FAIRQ_BATCH.name) if peers else ():
        ratios = [table[ours][c] / max(table[p][c] for p in peers) for c in cells]
        lines.append(f"| {ours} ÷ best peer | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")
    return lines


def notes(table: dict[str, dict[str, float]], skipped: dict[str, str]) -> list[str]:
    lines = [f"* {name}: skipped, {why}" for name, why in skipped.items() if name != systems.OBAN.name]
    lines.append(f"* {systems.oban_how()}")
    if "PgQueuer" in table:
        lines.append("* PgQueuer in the process columns runs its defaults (batch_size 10, no cap on running "
                     "tasks: it dequeues up to 10 jobs a round and runs them at once); in the concurrency column "
                     "batch_size 8 (uncapped: faster here than max_concurrent_tasks 8, which allows batches of 4).")
    lines.append("* `fairq, batch 10` is fairq.Worker(batch=10): claim_many of up to 10 a round, one settle_many; "
                 "fairq's jobs are spread over 100 flows (one leased event per flow at a time).")
    return lines
