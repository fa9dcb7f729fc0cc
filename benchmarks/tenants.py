"""Tenants: a small tenant behind a big one, and the claim's cost with many tenants.

    python3 benchmarks/tenants.py --quick                 # SQLite, small sizes, under a minute
    python3 benchmarks/tenants.py --db postgresql://...   # on a PostgreSQL server (a fresh database per queue)
    python3 benchmarks/run.py --only tenants              # the same figures in the SQLite benchmark
    python3 benchmarks/postgres.py --only tenants         # ... in the PostgreSQL one (its own server)

Two figures, each measured within one run:

1. A/B. Tenant A's jobs (--ab-jobs, default 5,000; one flow per job) are
   enqueued before tenant B's (--b-jobs, default 50); then --processes real
   worker processes (default 4; fairq.Worker, one thread each) drain the
   queue with a handler that sleeps --handler-ms (default 2). Reported: the
   completion index of B's last job (its place among all jobs by the time
   its handler finished; target <= 150: B gets one claim in two), and the
   drain time (barrier to the last handler done) ÷ the drain time of the
   same jobs in the same flows without tenants (target <= 1.2). Runs of the
   two are interleaved; medians of --repeat.
2. Claim cost. One claim + one ack, each its own transaction, serially on one
   connection (SQLite: synchronous=normal, so the figure is the claim's work,
   not the disk's flush). The median µs over --probes rounds, the median of
   --repeat such medians, the cases interleaved round by round, with
   --events waiting (default 1M) in --tenants flows (default 100k):
   "none" the flows without tenants; "each" every flow its own tenant
   (--tenants tenants); "few" the flows in 10 tenants; "capped" as "each",
   beside --capped more tenants (default 10k) with max_inflight=1, each
   holding one lease (a day long) and with one more event claimable but held
   by its cap. The cost must stay flat: "each" ÷ "few" (many tenants or
   few) and "capped" ÷ "each" (held tenants beside them or not) near 1;
   each case ÷ "none" is the price of the tenant level itself.

Absolute numbers describe this machine on this day; the ratios compare cases
measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ContextManager

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import fairq  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
BATCH = 10_000
FEW = 10  # tenants in the "few" case
DAY = 86_400.0

FULL = {"ab_jobs": 5_000, "b_jobs": 50, "processes": 4, "handler_ms": 2.0, "events": 1_000_000,
        "tenants": 100_000, "capped": 10_000, "probes": 300}
QUICK = {"ab_jobs": 1_000, "b_jobs": 50, "processes": 4, "handler_ms": 2.0, "events": 20_000,
         "tenants": 2_000, "capped": 500, "probes": 100}

#: fresh(): a context manager giving the target (a path or URL) of a new, empty queue.
Fresh = Callable[[], ContextManager[str]]


# -- 1. A/B: B's 50 jobs behind A's 5,000 ------------------------------------------------


def _ab_worker(target: str, handler_ms: float, barrier: Any, out: Any) -> None:
    """A worker process: wait for the others, then claim, sleep, ack until nothing is claimable."""
    done: list[tuple[float, str]] = []

    def handle(job: fairq.Job) -> None:
        time.sleep(handler_ms / 1000)
        done.append((time.monotonic(), job.event_id))

    try:
        with fairq.Queue(target) as q:
            worker = fairq.Worker(q, handle)
            barrier.wait()
            worker.run(until_idle=True, signals=False)
        out.put(("ok", done))
    except BaseException as exc:  # reported to the parent, which raises it
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def ab_drain(target: str, sizes: dict[str, Any], tenants: bool) -> dict[str, Any]:
    """One drain of A's jobs then B's (with or without tenants): B's last index, the drain time."""
    a, b = sizes["ab_jobs"], sizes["b_jobs"]
    with fairq.Queue(target) as q:
        for start in range(0, a, BATCH):
            q.enqueue_many([(f"A-{i}", {}, f"A-{i}", "A" if tenants else None)
                            for i in range(start, min(a, start + BATCH))])
        q.enqueue_many([(f"B-{i}", {}, f"B-{i}", "B" if tenants else None) for i in range(b)])
    n = sizes["processes"]
    barrier, out = SPAWN.Barrier(n + 1), SPAWN.Queue()
    procs = [SPAWN.Process(target=_ab_worker, args=(target, sizes["handler_ms"], barrier, out)) for _ in range(n)]
    for p in procs:
        p.start()
    barrier.wait()
    began = time.monotonic()
    results = [out.get(timeout=900) for _ in procs]  # the timeout only stops a hang
    for p in procs:
        p.join()
    errors = [r for kind, r in results if kind == "error"]
    if errors:
        raise RuntimeError(f"a worker failed: {errors[0]}")
    done = sorted(x for _, got in results for x in got)
    with fairq.Queue(target) as q:
        acked = q.stats(top=0).counts["acked"]
    if acked != a + b or len(done) != a + b:
        raise RuntimeError(f"{target}: {acked} acked, {len(done)} handled, of {a + b}")
    last_b = max(i for i, (_, event_id) in enumerate(done, 1) if event_id.startswith("B-"))
    return {"b_last_index": last_b, "drain_s": done[-1][0] - began}


def ab_case(fresh: Fresh, sizes: dict[str, Any], repeat: int, progress: Callable[[str], None]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"tenants": [], "plain": []}
    for r in range(repeat):
        for kind in runs:
            with fresh() as target:
                runs[kind].append(ab_drain(target, sizes, tenants=kind == "tenants"))
            progress(f"A/B {kind}, run {r + 1}: B's last job at {runs[kind][-1]['b_last_index']}, "
                     f"drain {runs[kind][-1]['drain_s']:.2f} s")
    out: dict[str, Any] = {kind: {"b_last_index": statistics.median(x["b_last_index"] for x in rs),
                                  "drain_s": statistics.median(x["drain_s"] for x in rs), "runs": rs}
                           for kind, rs in runs.items()}
    out["drain_ratio"] = out["tenants"]["drain_s"] / out["plain"]["drain_s"]
    out["sizes"] = {k: sizes[k] for k in ("ab_jobs", "b_jobs", "processes", "handler_ms")}
    return out


# -- 2. claim cost ---------------------------------------------------------------------


def fill(q: fairq.Queue, events: int, flows: int, tenant: Callable[[int], str | None]) -> None:
    """`events` events round-robin over `flows` flows f0.., flow k in tenant(k)."""
    for start in range(0, events, BATCH):
        q.enqueue_many([(f"w{i}", {}, f"f{i % flows}", tenant(i % flows))
                        for i in range(start, min(events, start + BATCH))])


def cap(q: fairq.Queue, tenants: int) -> None:
    """`tenants` tenants with max_inflight=1, each holding one day-long lease
    and with one more event (in another flow) claimable but held by the cap."""
    for k in range(tenants):
        q.set_tenant(f"c{k}", max_inflight=1)
    for start in range(0, tenants, BATCH // 2):
        q.enqueue_many([(f"c{k}-{s}", {}, f"c{k}-{s}", f"c{k}") for k in range(start, min(tenants, start + BATCH // 2))
                        for s in (1, 2)])
    held = 0
    while got := q.claim_many(1_000, lease_seconds=DAY):
        held += len(got)
    if held != tenants:
        raise RuntimeError(f"{held} leases held by {tenants} capped tenants")


def claim_ack_us(q: fairq.Queue, probes: int) -> float:
    """Median µs of one claim plus one ack, each its own transaction."""
    times = []
    for _ in range(probes):
        began = time.perf_counter()
        lease = q.claim()
        if lease is None:
            raise RuntimeError("nothing to claim")
        q.ack(lease)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6


CASES = ("none", "each", "few", "capped")


def claim_cost(fresh: Fresh, sizes: dict[str, Any], repeat: int, progress: Callable[[str], None],
               prepare: Callable[[str], None] = lambda target: None, **open_args: Any) -> dict[str, Any]:
    events, flows = sizes["events"] + sizes["probes"] * repeat, sizes["tenants"]
    owner: dict[str, Callable[[int], str | None]] = {
        "none": lambda k: None, "each": lambda k: f"t{k}", "few": lambda k: f"t{k % FEW}",
        "capped": lambda k: f"t{k}"}
    with contextlib.ExitStack() as stack:
        queues = {}
        for case in CASES:
            began = time.monotonic()
            target = stack.enter_context(fresh())
            q = queues[case] = stack.enter_context(fairq.Queue(target, **open_args))
            if case == "capped":
                cap(q, sizes["capped"])
            fill(q, events, flows, owner[case])
            prepare(target)
            progress(f"claim cost: {case} filled in {time.monotonic() - began:.0f} s")
        medians: dict[str, list[float]] = {case: [] for case in CASES}
        for _ in range(repeat):
            for case in CASES:
                medians[case].append(claim_ack_us(queues[case], sizes["probes"]))
    out: dict[str, Any] = {case: {"median_us": statistics.median(m), "runs_us": m} for case, m in medians.items()}
    for case in CASES[1:]:
        out[case]["ratio"] = out[case]["median_us"] / out["none"]["median_us"]
    out["sizes"] = {k: sizes[k] for k in ("events", "tenants", "capped", "probes")}
    return out


# -- the report ------------------------------------------------------------------------


def table(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    ab = results.get("ab")
    if ab is not None:
        s = ab["sizes"]
        lines += [
            "| tenants figure | measured | target |", "|---|---:|---|",
            f"| A/B ({s['ab_jobs']:,} A then {s['b_jobs']} B, {s['processes']} processes, {s['handler_ms']:g} ms): "
            f"B's last job, completion index | {ab['tenants']['b_last_index']:,.0f} "
            f"(without tenants {ab['plain']['b_last_index']:,.0f}) | <= 150 |",
            f"| A/B drain s, tenants / plain | {ab['tenants']['drain_s']:.2f} / {ab['plain']['drain_s']:.2f} "
            f"= {ab['drain_ratio']:.2f} | <= 1.2 |"]
    cost = results.get("cost")
    if cost is not None:
        s = cost["sizes"]
        label = {"none": f"{s['events']:,} events in {s['tenants']:,} flows, no tenants",
                 "each": f"the same flows, {s['tenants']:,} tenants (one each)",
                 "few": f"the same flows in {FEW} tenants",
                 "capped": f"the same {s['tenants']:,} tenants beside {s['capped']:,} at their cap"}
        lines += [*([""] if lines else []), "| claim+ack, one connection | median µs | ÷ no tenants | flat: ÷ |", "|---|---:|---:|---:|"]
        flat = {"each": ("few", f"{FEW} tenants"), "capped": ("each", "no capped tenants")}
        for case in CASES:
            ratio = f"{cost[case]['ratio']:.2f}" if "ratio" in cost[case] else ""
            versus = ""
            if case in flat:
                other, name = flat[case]
                versus = f"{cost[case]['median_us'] / cost[other]['median_us']:.2f} ({name})"
            lines.append(f"| {label[case]} | {cost[case]['median_us']:,.0f} | {ratio} | {versus} |")
    return lines


def run(fresh: Fresh, sizes: dict[str, Any], repeat: int, progress: Callable[[str], None],
        only: tuple[str, ...] = ("ab", "cost"), prepare: Callable[[str], None] = lambda target: None,
        **open_args: Any) -> dict[str, Any]:
    results: dict[str, Any] = {}
    if "ab" in only and sizes["ab_jobs"]:  # --ab-jobs 0 skips it
        results["ab"] = ab_case(fresh, sizes, repeat, progress)
    if "cost" in only and sizes["events"]:  # --events 0 skips it
        results["cost"] = claim_cost(fresh, sizes, repeat, progress, prepare, **open_args)
    return results


def sizes_from(args: argparse.Namespace, quick: bool, rename: dict[str, str] | None = None) -> dict[str, Any]:
    """The sizes: FULL or QUICK, with each size flag given replacing its value."""
    sizes = dict(QUICK if quick else FULL)
    for key in FULL:
        value = getattr(args, (rename or {}).get(key, key).replace("-", "_"), None)
        if value is not None:
            sizes[key] = value
    return sizes


def add_size_flags(parser: argparse.ArgumentParser, rename: dict[str, str] | None = None) -> None:
    """The size flags, --events, --tenants ... (rename: other names, on a script that has its own --events)."""
    for key, kind in (("ab_jobs", int), ("b_jobs", int), ("processes", int), ("handler_ms", float),
                      ("events", int), ("tenants", int), ("capped", int), ("probes", int)):
        name = (rename or {}).get(key, key).replace("_", "-")
        parser.add_argument(f"--{name}", type=kind, dest=name.replace("-", "_"),
                            help=f"tenants benchmark: {key} (default {FULL[key]:,}; quick {QUICK[key]:,})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument("--repeat", type=int, help="runs per figure; the median is reported (default 3; quick 1)")
    parser.add_argument("--db", help="a PostgreSQL server URL (a fresh database per queue); default SQLite files")
    parser.add_argument("--only", default="ab,cost", help="ab, cost or both (default)")
    parser.add_argument("--output", help="also write the results here as JSON")
    add_size_flags(parser)
    args = parser.parse_args(argv)
    sizes = sizes_from(args, args.quick)
    repeat = args.repeat or (1 if args.quick else 3)
    only = tuple(args.only.split(","))
    started = time.monotonic()

    def progress(text: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="fairq-tenants-") as folder:
        if args.db:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
            import pgops

            fresh: Fresh = lambda: pgops.fresh_database(args.db, prefix="bench")  # noqa: E731
            results = run(fresh, sizes, repeat, progress, only, prepare=analyze)
        else:
            counter = iter(range(1_000_000))
            fresh = lambda: contextlib.nullcontext(os.path.join(folder, f"{next(counter):03d}.db"))  # noqa: E731
            results = run(fresh, sizes, repeat, progress, only, synchronous="normal")
    print("\n".join(table(results)))
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


def analyze(target: str) -> None:
    """ANALYZE a PostgreSQL queue's database, as autovacuum soon would after a fill."""
    if not target.startswith("postgresql://"):
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("ANALYZE")


if __name__ == "__main__":
    sys.exit(main())
