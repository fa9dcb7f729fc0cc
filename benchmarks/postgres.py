"""fairq on PostgreSQL beside fairq on SQLite, on the same machine.

    python benchmarks/postgres.py --quick          # tiny sizes: checks that it runs (seconds)
    python benchmarks/postgres.py                  # the full run (many minutes; 1M events)
    python benchmarks/postgres.py --url postgresql://user@host:port/db --output results.json

Two measurements, each on a fresh queue:

1. claim+ack per second (the median of --repeat runs, 3 by default) through fairq.Worker (a handler that does nothing)
   with 1, 4, 8 and 16 worker processes, each process one Worker thread,
   over 100 flows; the clock starts when every process has opened its queue.
   (--quick runs 1 and 2 processes only.)
   SQLite: one file, synchronous=full. PostgreSQL: the server below.
2. the cost of one claim (claim then ack, serially, median and p99 in ms)
   with 1k and with 1M events waiting (ready, over up to 1,000 flows), and beside 100k blocked flows (each
   flow's head claimed under a long lease, so the flow's next event waits).
   The backlogs are made with Queue.enqueue_many in batches of 10,000
   events (no SQL outside fairq's own), and ANALYZE runs on PostgreSQL
   before the claims are timed.

Without --url the benchmark starts its own throwaway PostgreSQL cluster
(initdb as the `postgres` user when run as root) with fsync ON and the
default synchronous_commit, so a commit waits for its flush as SQLite's
synchronous=full does; it is removed afterwards. Absolute numbers only
describe this machine on this day; run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "support"))  # pgcluster, pgops: a throwaway cluster, databases

import fairq  # noqa: E402
import pgcluster  # noqa: E402
import pgops  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
FLOWS = 100
BATCH = 10_000

FULL = {"events": 20_000, "workers": (1, 4, 8, 16), "small": 1_000, "large": 1_000_000, "blocked": 100_000,
        "claims": 500}
QUICK = {"events": 300, "workers": (1, 2), "small": 100, "large": 2_000, "blocked": 500, "claims": 50}


# -- throughput ------------------------------------------------------------------


def _drain(target: str, barrier: Any) -> None:
    """A worker process: open the queue, wait for the others, claim and ack until idle."""
    with fairq.Queue(target) as q:
        worker = fairq.Worker(q, lambda job: None)
        barrier.wait()
        worker.run(until_idle=True, signals=False)


def throughput(target: str, events: int, processes: int) -> float:
    """claim+ack per second of `processes` worker processes draining `events` events."""
    with fairq.Queue(target) as q:
        for start in range(0, events, BATCH):
            q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % FLOWS}") for i in range(start, min(events, start + BATCH))])
    barrier = SPAWN.Barrier(processes + 1)
    procs = [SPAWN.Process(target=_drain, args=(target, barrier)) for _ in range(processes)]
    for p in procs:
        p.start()
    barrier.wait()
    began = time.perf_counter()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - began
    with fairq.Queue(target) as q:
        acked = q.stats(top=0).counts["acked"]
    if acked != events or any(p.exitcode for p in procs):
        raise RuntimeError(f"{target}: {acked} of {events} acked, exit codes {[p.exitcode for p in procs]}")
    return events / elapsed


# -- claim cost ------------------------------------------------------------------


def fill(q: fairq.Queue, events: int, prefix: str, flows: int = FLOWS) -> None:
    for start in range(0, events, BATCH):
        q.enqueue_many([(f"{prefix}{i}", {}, f"{prefix}f{i % flows}")
                        for i in range(start, min(events, start + BATCH))])


def block(q: fairq.Queue, flows: int) -> None:
    """`flows` flows of two events each, every head claimed under a one-day lease: blocked."""
    for start in range(0, flows, BATCH // 2):
        q.enqueue_many([(f"b{i}-{s}", {}, f"b{i}") for i in range(start, min(flows, start + BATCH // 2))
                        for s in (1, 2)])
    held = 0
    while held < flows:
        got = q.claim_many(min(1_000, flows - held), lease_seconds=86_400)
        if not got:
            raise RuntimeError(f"only {held} of {flows} heads could be claimed")
        held += len(got)


def claim_cost(q: fairq.Queue, claims: int) -> tuple[float, float]:
    """(median, p99) ms of a claim over `claims` serial claim+ack rounds."""
    times = []
    for _ in range(claims):
        began = time.perf_counter()
        lease = q.claim()
        times.append((time.perf_counter() - began) * 1000)
        if lease is None:
            raise RuntimeError("nothing to claim")
        q.ack(lease)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def analyze(target: str) -> None:
    if not target.startswith("postgresql://"):
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("ANALYZE")  # the planner sees the backlog, as autovacuum would soon


# -- stores ----------------------------------------------------------------------


@contextmanager
def postgres(url: str | None) -> Iterator[tuple[str, str]]:
    """(server URL, its fsync setting): the one given, or a throwaway cluster with fsync on."""
    if url is not None:
        yield url, _fsync(url)
        return
    with pgcluster.cluster(fsync=True) as cluster:
        yield cluster.url, _fsync(cluster.url)


def _fsync(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW fsync").fetchone()
    return str(row[0]) if row else "?"


class Targets:
    """Fresh queues: an SQLite file in a temporary folder, or a new PostgreSQL database."""

    def __init__(self, server: str, folder: str) -> None:
        self.server = server
        self.folder = folder
        self.n = 0

    @contextmanager
    def fresh(self, store: str) -> Iterator[str]:
        self.n += 1
        if store == "sqlite":
            yield os.path.join(self.folder, f"{self.n:03d}.db")
            return
        with pgops.fresh_database(self.server, prefix="bench") as url:
            yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--url", help="a PostgreSQL server to create databases on (default: start one, fsync on)")
    parser.add_argument("--output", help="also write the results here as JSON")
    parser.add_argument("--events", type=int, help="events drained per throughput run (default: 20,000; --quick 300)")
    parser.add_argument("--repeat", type=int, default=3, help="throughput runs per cell; the median is reported")
    args = parser.parse_args()
    sizes = dict(QUICK if args.quick else FULL)
    if args.events is not None:
        sizes["events"] = args.events
    results: dict[str, Any] = {"sizes": sizes, "python": sys.version.split()[0], "machine": platform.platform(),
                               "cpus": os.cpu_count(), "throughput": {}, "claim_ms": {}}
    with postgres(args.url) as (server, fsync), tempfile.TemporaryDirectory(prefix="fairq-bench-") as folder:
        results["postgres_fsync"] = fsync
        targets = Targets(server, folder)
        print(f"PostgreSQL fsync={fsync}; SQLite synchronous=full; {sizes['events']} events over {FLOWS} flows")
        print(f"{'workers':>8} {'sqlite/s':>10} {'postgres/s':>11}")
        for n in sizes["workers"]:
            row = {}
            for store in ("sqlite", "postgres"):
                runs = []
                for _ in range(args.repeat):
                    with targets.fresh(store) as target:
                        runs.append(throughput(target, sizes["events"], n))
                row[store] = statistics.median(runs)
            results["throughput"][n] = row
            print(f"{n:>8} {row['sqlite']:>10.0f} {row['postgres']:>11.0f}")
        print(f"\nclaim cost, ms (median / p99 of {sizes['claims']} claim+ack rounds)")
        cases = (("waiting", sizes["small"], 0), ("waiting", sizes["large"], 0),
                 ("beside blocked flows", sizes["small"], sizes["blocked"]))
        for label, waiting, blocked in cases:
            name = f"{waiting} {label}" + (f" ({blocked} blocked)" if blocked else "")
            row = {}
            for store in ("sqlite", "postgres"):
                with targets.fresh(store) as target:
                    with fairq.Queue(target) as q:
                        if blocked:
                            block(q, blocked)
                        fill(q, waiting, "w", flows=min(waiting, 1_000))
                        analyze(target)
                        row[store] = claim_cost(q, sizes["claims"])
            results["claim_ms"][name] = row
            print(f"  {name:<40} sqlite {row['sqlite'][0]:6.2f} / {row['sqlite'][1]:6.2f}   "
                  f"postgres {row['postgres'][0]:6.2f} / {row['postgres'][1]:6.2f}")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
