"""fairq benchmarks: fairq against raw SQLite and a reference queue, in one run.

    python benchmarks/run.py             # everything (a few minutes)
    python benchmarks/run.py --quick     # smaller sizes, under a minute
    python benchmarks/run.py --output results.json --repeat 5
    python benchmarks/run.py --quick --only single,batch   # some figures only
    python benchmarks/run.py --only tenants --events 100000 --tenants 10000   # tenants (benchmarks/tenants.py), smaller

Every figure is the median of --repeat runs, fairq and the reference queue
(benchmarks/reference.py) interleaved so both see the same machine noise.
Ratios compare the two within this one run; absolute numbers only describe
this machine on this day. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import contention  # noqa: E402
import tenants as tenant_bench  # noqa: E402
import fairq  # noqa: E402
from reference import ReferenceQueue  # noqa: E402
from report import SYNCS, table  # noqa: E402



class Scratch:
    """Fresh database paths in one temporary folder."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="fairq-bench-")
        self._n = 0

    def path(self, name: str) -> str:
        self._n += 1
        return os.path.join(self._dir.name, f"{self._n:03d}-{name}.db")

    def close(self) -> None:
        self._dir.cleanup()


def median_of(repeat: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeat))


# -- raw SQLite ------------------------------------------------------------------


def raw_connection(path: str, sync: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = " + sync.upper())
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    return conn


def raw_commits(scratch: Scratch, sync: str, n: int) -> float:
    """Single-row commits per second: the floor for any one-item-per-commit path."""
    conn = raw_connection(scratch.path("raw"), sync)
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (body) VALUES (?)", ('{"i":%d}' % i,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def raw_batch_rows(scratch: Scratch, sync: str, batches: int) -> float:
    """Rows per second inserted in 1000-row transactions."""
    conn = raw_connection(scratch.path("rawbatch"), sync)
    rows = [('{"i":%d}' % i,) for i in range(1000)]
    start = time.perf_counter()
    for _ in range(batches):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO t (body) VALUES (?)", rows)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return batches * 1000 / elapsed


# -- cycles: enqueue, claim, settle ----------------------------------------------


def fairq_cycle(scratch: Scratch, sync: str, items: int, batch: int) -> tuple[float, float]:
    """(items per second, process CPU µs per item)."""
    q = fairq.Queue(scratch.path("fairq"), synchronous=sync)
    cpu = time.process_time()
    start = time.perf_counter()
    if batch == 1:
        for i in range(items):
            q.enqueue(f"e{i}", {"i": i})
            q.ack(q.claim())
    else:
        for k in range(0, items, batch):
            q.enqueue_many([(f"e{i}", {"i": i}) for i in range(k, k + batch)])
            q.settle_many([(lease, "ack") for lease in q.claim_many(batch)])
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    assert q.stats().counts["acked"] == items
    q.close()
    return items / elapsed, cpu / items * 1e6


def reference_cycle(scratch: Scratch, sync: str, items: int, batch: int) -> tuple[float, float]:
    """(items per second, process CPU µs per item)."""
    ref = ReferenceQueue(scratch.path("ref"), synchronous=sync)
    cpu = time.process_time()
    start = time.perf_counter()
    for k in range(0, items, batch):
        now = time.time()
        ref.enqueue_many([{"i": i} for i in range(k, k + batch)], now)
        ref.ack_many([job_id for job_id, _ in ref.claim_many(batch, now)])
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    ref.close()
    return items / elapsed, cpu / items * 1e6


def compare_cycles(scratch: Scratch, sync: str, items: int, batch: int, repeat: int) -> dict[str, float]:
    """Items per second (and process CPU per item, which a busy machine
    disturbs less) of fairq and the reference, interleaved; medians."""
    fq, ref = [], []
    for _ in range(repeat):
        fq.append(fairq_cycle(scratch, sync, items, batch))
        ref.append(reference_cycle(scratch, sync, items, batch))
    f, r = statistics.median(x for x, _ in fq), statistics.median(x for x, _ in ref)
    f_cpu, r_cpu = statistics.median(c for _, c in fq), statistics.median(c for _, c in ref)
    return {"fairq_items_per_s": f, "reference_items_per_s": r, "ratio": f / r,
            "fairq_cpu_us_per_item": f_cpu, "reference_cpu_us_per_item": r_cpu, "cpu_ratio": r_cpu / f_cpu}


# -- claim + settle latency against backlog size -----------------------------------


def claim_settle_median_us(q: fairq.Queue, n: int) -> float:
    """Median µs of one claim plus one ack, each its own transaction."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        lease = q.claim()
        q.ack(lease)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def grow(q: fairq.Queue, flows: int, start: int, stop: int) -> None:
    """Enqueue events start..stop-1, spread round-robin over `flows` flows."""
    for k in range(start, stop, 10_000):
        q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % flows}") for i in range(k, min(stop, k + 10_000))])


def latency_by_backlog(scratch: Scratch, sizes: list[int], spreads: list[int], probes: int,
                       repeat: int) -> dict[str, Any]:
    """claim+settle latency with `size` events waiting over `spread` flows (synchronous=normal,
    so the figure is the work a claim does, not the disk's flush time)."""
    out: dict[str, Any] = {}
    for spread in spreads:
        q = fairq.Queue(scratch.path(f"backlog-{spread}"), synchronous="normal")
        waiting = next_id = 0
        base = None
        for size in sizes:
            add = size + probes * repeat - waiting  # the probes consume events
            grow(q, spread, next_id, next_id + add)
            next_id += add
            figure = median_of(repeat, lambda: claim_settle_median_us(q, probes))
            waiting = size
            base = base or figure
            out[f"{size}/{spread}"] = {"events": size, "flows": min(spread, size),
                                       "median_us": figure, "ratio_to_1k": figure / base}
        q.close()
    return out


def latency_with_blocked_flows(scratch: Scratch, blocked: int, probes: int, repeat: int) -> dict[str, Any]:
    """claim+settle latency with `blocked` flows whose heads are quarantined (half)
    or backing off for a day (half), beside a 1k-event backlog over 1k flows;
    compared with the same backlog and no blocked flows."""
    clean_q = fairq.Queue(scratch.path("clean"), synchronous="normal")
    grow(clean_q, 1000, 0, 1000 + probes * repeat)
    clean = median_of(repeat, lambda: claim_settle_median_us(clean_q, probes))
    clean_q.close()

    day = fairq.Backoff(base=86_400, cap=86_400, jitter=False)
    q = fairq.Queue(scratch.path("blocked"), synchronous="normal", backoff=day)
    for k in range(0, blocked, 10_000):
        q.enqueue_many([(f"b{i}", {"i": i}, f"blocked-{i}") for i in range(k, min(blocked, k + 10_000))])
    while leases := q.claim_many(5000):
        q.settle_many([(lease, "fail", "benchmark") if i % 2 else (lease, "retry", "benchmark")
                       for i, lease in enumerate(leases)])
    grow(q, 1000, 0, 1000 + probes * repeat)
    stats = q.stats()
    figure = median_of(repeat, lambda: claim_settle_median_us(q, probes))
    q.close()
    return {"blocked_flows": blocked, "quarantined": stats.counts["quarantined"],
            "backing_off": stats.counts["ready"] - (1000 + probes * repeat), "median_us": figure,
            "clean_median_us": clean, "ratio_to_1k": figure / clean}


# -- four processes draining one file ----------------------------------------------


def _drain_fairq(path: str, sync: str, barrier: Any, out: Any) -> None:
    q = fairq.Queue(path, synchronous=sync, busy_timeout=60)  # the file's stored 600 s lease
    seen: list[str] = []
    errors: Counter[str] = Counter()
    barrier.wait()
    contention.drain_loop(q, seen, errors)
    out.put((seen, dict(errors)))


def _drain_reference(path: str, sync: str, barrier: Any, out: Any) -> None:
    ref = ReferenceQueue(path, synchronous=sync, busy_timeout=60, lease_seconds=600)
    seen, errors, idle = [], Counter(), 0
    barrier.wait()
    while idle < 20:
        try:
            got = ref.claim_many(1, time.time())
            if not got:
                idle += 1
                time.sleep(0.001)
                continue
            idle = 0
            ref.ack_many([got[0][0]])
            seen.append(got[0][1]["i"])
        except Exception as exc:  # counted and reported
            errors[type(exc).__name__ + ": " + str(exc)[:60]] += 1
    out.put((seen, dict(errors)))


def drain(scratch: Scratch, sync: str, events: int, procs: int, which: str) -> dict[str, Any]:
    path = scratch.path(f"drain-{which}")
    if which == "fairq":
        with fairq.Queue(path, synchronous=sync, lease_seconds=600) as q:
            for k in range(0, events, 5000):
                q.enqueue_many([(f"e{i}", {"i": i}) for i in range(k, min(events, k + 5000))])
        expected = {f"e{i}" for i in range(events)}
        target = _drain_fairq
    else:
        ref = ReferenceQueue(path, synchronous=sync)
        ref.enqueue_many([{"i": i} for i in range(events)], time.time())
        ref.close()
        expected = set(range(events))
        target = _drain_reference
    return contention.timed_drainers(target, (path, sync), procs, expected)


def compare_drains(scratch: Scratch, sync: str, events: int, procs: int, repeat: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"fairq": [], "reference": []}
    for _ in range(repeat):
        for which in runs:
            runs[which].append(drain(scratch, sync, events, procs, which))
    out: dict[str, Any] = {}
    for which, rs in runs.items():
        out[which] = {
            "items_per_s": statistics.median(r["items_per_s"] for r in rs),
            "duplicates": sum(r["duplicates"] for r in rs),
            "losses": sum(r["losses"] for r in rs),
            "errors": sum(r["errors"] for r in rs),
            "error_kinds": [r["error_kinds"] for r in rs if r["error_kinds"]],
        }
    out["ratio"] = out["fairq"]["items_per_s"] / out["reference"]["items_per_s"]
    return out


# -- the run ---------------------------------------------------------------------


FIGURES = ("raw", "single", "batch", "drain", "latency", "blocked", "contention", "tenants")


def run(quick: bool, repeat: int, progress: Callable[[str], None],
        only: frozenset[str] = frozenset(FIGURES), tenant_sizes: dict[str, Any] | None = None) -> dict[str, Any]:
    scratch = Scratch()
    sizes = dict(
        raw_commits=500 if quick else 2000, raw_batches=20 if quick else 100,
        single_items=300 if quick else 1500, batch_items=3000 if quick else 20_000,
        backlog=[1_000, 10_000, 100_000] if quick else [1_000, 10_000, 100_000, 1_000_000],
        spreads=[10, 1_000, 100_000], probes=100 if quick else 300,
        blocked=20_000 if quick else 100_000, drain_events=2_000 if quick else 10_000,
    )
    results: dict[str, Any] = {"sizes": sizes}
    try:
        for sync in SYNCS:
            if "raw" in only:
                progress(f"raw SQLite, synchronous={sync}")
                results[f"raw_{sync}"] = {
                    "single_row_commits_per_s": median_of(
                        repeat, lambda: raw_commits(scratch, sync, sizes["raw_commits"])),
                    "rows_per_s_in_1000_row_transactions": median_of(
                        repeat, lambda: raw_batch_rows(scratch, sync, sizes["raw_batches"])),
                }
            if "single" in only:
                progress(f"single-item cycle, synchronous={sync}")
                results[f"single_{sync}"] = compare_cycles(scratch, sync, sizes["single_items"], 1, repeat)
            if "batch" in only:
                progress(f"batch cycle (100), synchronous={sync}")
                results[f"batch_{sync}"] = compare_cycles(scratch, sync, sizes["batch_items"], 100, repeat)
            if "drain" in only:
                progress(f"4-process drain, synchronous={sync}")
                results[f"drain_{sync}"] = compare_drains(scratch, sync, sizes["drain_events"], 4, repeat)
        if "contention" in only:
            if "drain_full" in results:
                progress("4 processes x 4 threads drain, synchronous=full")
                results["drain_threads"] = contention.drains(lambda: scratch.path("drain-threads"),
                                                             sizes["drain_events"], repeat)
                results["drain_threads"]["ratio"] = (results["drain_threads"]["items_per_s"]
                                                     / results["drain_full"]["reference"]["items_per_s"])
            progress("concurrent callers: fairq serve, threaded Worker, fairness")
            results["contention"] = contention.run(quick, repeat, os.path.dirname(scratch.path("x")))
        if "latency" in only:
            progress("claim+settle latency by backlog")
            results["latency"] = latency_by_backlog(scratch, sizes["backlog"], sizes["spreads"],
                                                    sizes["probes"], repeat)
        if "blocked" in only:
            progress("claim+settle latency with blocked flows")
            results["latency_blocked"] = latency_with_blocked_flows(scratch, sizes["blocked"],
                                                                    sizes["probes"], repeat)
        if "tenants" in only:
            progress("tenants: B's jobs behind A's, claim cost with many tenants")
            results["tenants"] = tenant_bench.run(
                lambda: contextlib.nullcontext(scratch.path("tenants")),
                tenant_sizes or dict(tenant_bench.QUICK if quick else tenant_bench.FULL), repeat, progress,
                synchronous="normal")
    finally:
        scratch.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, under a minute")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (median); default 3, quick 1")
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    parser.add_argument("--only", default=",".join(FIGURES),
                        help=f"comma-separated figures to measure (default all: {','.join(FIGURES)})")
    tenant_bench.add_size_flags(parser)
    args = parser.parse_args(argv)
    only = frozenset(name.strip() for name in args.only.split(",") if name.strip())
    if not only or only - set(FIGURES):
        parser.error(f"--only takes some of {', '.join(FIGURES)}; got {args.only!r}")
    repeat = args.repeat or (1 if args.quick else 3)
    load_before = os.getloadavg()  # the machine may be shared: say how busy it was
    started = time.perf_counter()
    results = run(args.quick, repeat, lambda msg: print(f"[{time.perf_counter() - started:6.1f}s] {msg}",
                                                       file=sys.stderr, flush=True), only,
                  tenant_bench.sizes_from(args, args.quick))
    results["machine"] = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
                          "platform": platform.platform(), "cpus": os.cpu_count(),
                          "fairq": fairq.__version__, "repeat": repeat, "quick": args.quick,
                          "only": sorted(only), "load_average_before": load_before,
                          "load_average_after": os.getloadavg(),
                          "seconds": time.perf_counter() - started}
    print(table(results))
    print(f"\n{results['machine']}")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
