"""fairq on PostgreSQL against a raw SKIP LOCKED queue on the same server, in one run.

    python3 benchmarks/postgres.py --quick       # tiny sizes, RTT 0 and 1 ms, 1 and 2 processes, 1 run per cell
    python3 benchmarks/postgres.py               # the full run (an hour or more; a 1M-event backlog)
    python3 benchmarks/postgres.py --events 4000 --repeat 3 --rtt-ms 0,1 --workers 1,4,8 --backlog 0
    python3 benchmarks/postgres.py --url postgresql://user@host:port/db --output results.json
    python3 benchmarks/postgres.py --only trips  # some sections only: drains, trips, cost, worker
    python3 benchmarks/postgres.py --only peers --repeat 3  # fairq beside procrastinate and PgQueuer
    python3 benchmarks/postgres.py --only tenants --tenant-events 100000 --tenants 10000  # tenants, smaller

Without --url it starts its own throwaway PostgreSQL cluster (initdb, as the
`postgres` user when run as root) with fsync on, synchronous_commit on and
shared_buffers 256MB, and removes it afterwards. Everything runs on the one
machine: clients, server and the delay proxy share its cores, so run it alone
and read absolute numbers as this machine on this day; the ratios compare two
queues measured in the same run, interleaved, on the same server.

Sections and what each figure means:

1. drains (benchmarks/pg_drain.py). A fresh schema is filled with --events
   events (single items) or --batch-events (batches of 100), then N processes
   (--workers, default 1,4,8,16; --quick 1,2) each open a connection, wait on
   a barrier, and claim and ack until every event is acked. "raw" is the
   reference queue of benchmarks/pg_raw.py (one autocommit statement per
   claim and per ack, filled by COPY); "fairq" is a plain q.claim() /
   q.ack(lease) loop (batches: q.claim_many(100) / q.settle_many) over 100
   flows filled with enqueue_many; ANALYZE before the clock starts.
   raw /s, fairq /s: events acked per second from the barrier to the last
   ack, the median of --repeat runs (default 3; --quick 1), raw and fairq
   runs interleaved. fairq ÷ raw: the ratio of those medians. fairq empty
   claims: claims that came back empty while others held the remaining work
   (median per run; each is retried after 1 ms and is a whole transaction):
   fairq leases at most one event per flow, so with 100 flows one
   claim_many(100) can hold every flow's head and leave the other processes
   nothing until it settles. Scaling: the
   8-process figure ÷ the 1-process figure (or the largest ÷ the smallest
   process count run), for each queue.
   Every cell is measured at each --rtt-ms round trip (default 0,1): at 0 the
   processes connect straight to the server; otherwise through
   benchmarks/latency_proxy.py, a TCP proxy on 127.0.0.1 that holds each
   direction's bytes for half the round trip. "RTT check" prints SELECT 1
   round trips straight and through each proxy, so the added delay is seen,
   not assumed.
2. lock waits (benchmarks/pg_waits.py), during every run of the 8-process
   drains (or the largest count up to 8): pg_stat_activity sampled every
   ~10 ms for the drain's backends. Lock samples ÷ claim: backends seen
   waiting with wait_event_type 'Lock', divided by claim calls that got
   work; ≈ lock wait ms ÷ claim: the same times the sampling interval, an
   estimate of time spent waiting on row and transaction locks per claim;
   top wait events with their share of backend samples ("Client:ClientRead":
   waiting for its client, "active:on CPU": running). "SELECT 1 ms
   during drain": the sampler times a SELECT 1 through the drain's proxy
   before each sample: the round trip a request really saw during the drain
   (the proxy's delay, woken late on a busy machine, plus the server's
   queueing; the 0 ms row has the second alone).
3. round trips per verb (benchmarks/pg_trips.py): one call of each verb on a
   warm queue, counted on the wire by the proxy (no delay): round trips
   (client speaks again after the server answered) and statements (Query and
   Execute messages), BEGIN and COMMIT included; the raw queue's verbs as a
   check (one each).
4. claim cost: serial claim+ack rounds on one connection (median and p99 of
   the claim, ms) with 1k and --backlog (default 1M, --quick 2k; 0 skips it)
   events waiting, and beside 100k blocked flows; fairq on SQLite
   (synchronous=full) beside it.
5. worker: claim+ack per second through fairq.Worker (no-op handler, one
   thread per process) on SQLite and PostgreSQL, 0 ms only (the older figure;
   --quick runs it only when --only names it).
6. peers (benchmarks/pg_peers.py; only when --only names it): jobs/s of
   --peer-jobs no-op jobs (default 2,000; --quick 200) drained by fairq's,
   procrastinate's and PgQueuer's own workers, 1, 4 and 8 processes and one
   process of concurrency 8, each system in a fresh database; "fairq ÷ best
   peer" per column. A peer that is not installed is skipped, saying why
   (pip install procrastinate pgqueuer, or the project's `bench` extra).

7. tenants (benchmarks/tenants.py, on PostgreSQL): B's 50 jobs behind A's
   5,000 with 4 worker processes and a 2 ms handler (B's last completion
   index; the drain time ÷ the same drain without tenants), and the claim
   cost with --tenant-events (default 1M) waiting in --tenants flows
   (default 100k): without tenants, a tenant per flow, 10 tenants, and beside
   --capped (default 10k) tenants at their cap; benchmarks/tenants.py says
   exactly what each figure is.

--output FILE writes every figure (and each run's raw numbers) as JSON.
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
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "support"))  # pgcluster, pgops: a throwaway cluster, databases
sys.path.insert(0, str(ROOT / "benchmarks"))

import fairq  # noqa: E402
import pg_peers  # noqa: E402
import pg_report  # noqa: E402
import pg_trips  # noqa: E402
import tenants as tenant_bench  # noqa: E402
import pgcluster  # noqa: E402
import pgops  # noqa: E402
from latency_proxy import LatencyProxy, select1_ms  # noqa: E402
from pg_drain import DrainPool  # noqa: E402
from pg_waits import merge  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
FLOWS = 100
BATCH = 10_000
CLAIM_BATCH = 100  # items per claim_many / settle_many in the batch drains
SECTIONS = ("drains", "trips", "cost", "worker", "tenants")
OPTIONAL = ("peers",)  # run only when --only names them
TENANT_FLAGS = {"events": "tenant-events"}  # --events is the drains'

FULL = {"events": 4_000, "batch_events": 40_000, "workers": (1, 4, 8, 16), "repeat": 3, "small": 1_000,
        "backlog": 1_000_000, "blocked": 100_000, "claims": 500, "worker_events": 4_000,
        "peer_jobs": 2_000}
QUICK = {"events": 100, "batch_events": 1_000, "workers": (1, 2), "repeat": 1, "small": 100, "backlog": 2_000,
         "blocked": 500, "claims": 50, "worker_events": 200,
         "peer_jobs": 200}


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


# -- drains: raw and fairq, each RTT ------------------------------------------------


def run_drains(server: str, sizes: dict[str, Any], rtts: list[float], results: dict[str, Any]) -> None:
    parts = urllib.parse.urlsplit(server)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    workers = sizes["workers"]
    sampled = max([n for n in workers if n <= 8] or [min(workers)])
    high, low = (8 if 8 in workers else max(workers)), (1 if 1 in workers else min(workers))
    check = {"straight to the server": select1_ms(server)}
    rows: list[dict[str, Any]] = []
    scale, waits = [], []
    with DrainPool(list(workers)) as pool:
        for rtt in rtts:
            proxy = LatencyProxy(host, port, rtt) if rtt > 0 else None
            try:
                if proxy is not None:
                    check[f"through the proxy, {rtt:g} ms"] = select1_ms(proxy.via_proxy(server))
                for batch, events in ((1, sizes["events"]), (CLAIM_BATCH, sizes["batch_events"])):
                    for n in workers:
                        row, runs = cell(pool, server, events, n, batch, sizes["repeat"], proxy, n == sampled)
                        rows.append({"rtt_ms": rtt, **row})
                        if n == sampled:
                            waits += [{"rtt_ms": rtt, "batch": batch, "processes": n, "kind": kind,
                                       "waits": merge([r["waits"] for r in runs[kind]])} for kind in runs]
                    rates = {r["processes"]: r for r in rows if r["rtt_ms"] == rtt and r["batch"] == batch}
                    if high in rates and low in rates and high != low:
                        scale.append({"rtt_ms": rtt, "batch": batch, "high": high, "low": low, **{
                            kind: rates[high][f"{kind}_per_s"] / rates[low][f"{kind}_per_s"]
                            for kind in ("raw", "fairq")}})
            finally:
                if proxy is not None:
                    proxy.close()
    results.update(rtt_check=check, drains=rows, scaling=scale, waits=waits)
    print("\n## RTT check\n", *pg_report.rtt_check(check), sep="\n")
    print("\n## Drains: raw SKIP LOCKED queue and fairq's claim/ack loop\n",
          *pg_report.drains(rows, sizes["repeat"]), sep="\n")
    print("\n## Scaling\n", *pg_report.scaling(scale), sep="\n")
    print(f"\n## Lock waits during the {sampled}-process drains (all runs of the cell)\n",
          *pg_report.waits(waits), sep="\n")


def cell(pool: DrainPool, server: str, events: int, n: int, batch: int, repeat: int, proxy: LatencyProxy | None,
         sample: bool) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """One table row: `repeat` raw and fairq drains, interleaved; their medians and ratio."""
    runs: dict[str, list[dict[str, Any]]] = {"raw": [], "fairq": []}
    for _ in range(repeat):
        for kind in ("raw", "fairq"):
            runs[kind].append(pool.drain(kind, server, events, n, batch, via=proxy, sample=sample))
    raw = statistics.median(r["items_per_s"] for r in runs["raw"])
    fq = statistics.median(r["items_per_s"] for r in runs["fairq"])
    progress(f"RTT {proxy.rtt_ms if proxy else 0:g} ms, batch {batch}, {n} processes: "
             f"raw {raw:,.0f}/s, fairq {fq:,.0f}/s")
    return ({"batch": batch, "processes": n, "events": events, "raw_per_s": raw, "fairq_per_s": fq,
             "ratio": fq / raw, "raw_runs": [_plain(r) for r in runs["raw"]],
             "fairq_runs": [_plain(r) for r in runs["fairq"]]}, runs)


def _plain(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "waits"}


# -- the fairq.Worker figure ---------------------------------------------------------


def _worker_drain(target: str, barrier: Any) -> None:
    """A worker process: open the queue, wait for the others, claim and ack until idle."""
    with fairq.Queue(target) as q:
        worker = fairq.Worker(q, lambda job: None)
        barrier.wait()
        worker.run(until_idle=True, signals=False)


def throughput(target: str, events: int, processes: int) -> float:
    """claim+ack per second of `processes` fairq.Worker processes draining `events` events."""
    with fairq.Queue(target) as q:
        for start in range(0, events, BATCH):
            q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % FLOWS}") for i in range(start, min(events, start + BATCH))])
    barrier = SPAWN.Barrier(processes + 1)
    procs = [SPAWN.Process(target=_worker_drain, args=(target, barrier)) for _ in range(processes)]
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


def run_claim_cost(targets: Targets, sizes: dict[str, Any], results: dict[str, Any]) -> None:
    cases = [("waiting", sizes["small"], 0)]
    if sizes["backlog"]:
        cases.append(("waiting", sizes["backlog"], 0))
    cases.append(("beside blocked flows", sizes["small"], sizes["blocked"]))
    for label, waiting, blocked in cases:
        name = f"{waiting} {label}" + (f" ({blocked} blocked)" if blocked else "")
        row = {}
        for store in ("sqlite", "postgres"):
            with targets.fresh(store) as target, fairq.Queue(target) as q:
                if blocked:
                    block(q, blocked)
                fill(q, waiting, "w", flows=min(waiting, 1_000))
                analyze(target)
                row[store] = claim_cost(q, sizes["claims"])
        results["claim_ms"][name] = row
        progress(f"claim cost, {name}")
    print("\n## Claim cost\n", *pg_report.claim_cost(results["claim_ms"], sizes["claims"]), sep="\n")


def run_worker(targets: Targets, sizes: dict[str, Any], results: dict[str, Any]) -> None:
    for n in sizes["workers"]:
        row = {}
        for store in ("sqlite", "postgres"):
            runs = []
            for _ in range(sizes["repeat"]):
                with targets.fresh(store) as target:
                    runs.append(throughput(target, sizes["worker_events"], n))
            row[store] = statistics.median(runs)
        results["throughput"][n] = row
        progress(f"worker, {n} processes")
    print(f"\n## fairq.Worker, {sizes['worker_events']} events over {FLOWS} flows\n",
          *pg_report.worker(results["throughput"]), sep="\n")


# -- stores ----------------------------------------------------------------------


@contextmanager
def postgres(url: str | None, shared_buffers: str) -> Iterator[str]:
    """The server URL: the one given, or a throwaway cluster with fsync on."""
    if url is not None:
        yield url
        return
    cluster = pgcluster.Cluster(fsync=True).init()
    try:
        with open(cluster.data / "postgresql.conf", "a") as conf:
            conf.write(f"synchronous_commit = on\nshared_buffers = '{shared_buffers}'\n")
        cluster.start()
        yield cluster.url
    finally:
        cluster.remove()


def settings(url: str) -> dict[str, str]:
    import psycopg

    names = ("server_version", "fsync", "synchronous_commit", "shared_buffers", "max_connections")
    with psycopg.connect(url) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}  # type: ignore[index]


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


def arguments() -> tuple[argparse.Namespace, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--url", help="a PostgreSQL server to create databases on (default: start one, fsync on)")
    parser.add_argument("--output", help="also write the results here as JSON")
    parser.add_argument("--events", type=int, help="events per single-item drain (default 4,000; --quick 100)")
    parser.add_argument("--batch-events", type=int, help="events per batch drain (default 40,000; --quick 1,000)")
    parser.add_argument("--repeat", type=int, help="runs per cell; the median is reported (default 3; --quick 1)")
    parser.add_argument("--workers", help="process counts, e.g. 1,4,8,16 (the default; --quick 1,2)")
    parser.add_argument("--rtt-ms", default="0,1", help="round trips added by the proxy, ms (default 0,1)")
    parser.add_argument("--backlog", type=int, help="the large claim-cost backlog (default 1M; --quick 2k; 0: skip)")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"sections to run, of {','.join(SECTIONS + OPTIONAL)} (default {','.join(SECTIONS)})")
    parser.add_argument("--peer-jobs", type=int, help="no-op jobs per peers run (default 2,000; --quick 200)")
    parser.add_argument("--shared-buffers", default="256MB", help="of the throwaway cluster (default 256MB)")
    tenant_bench.add_size_flags(parser, rename=TENANT_FLAGS)
    args = parser.parse_args()
    sizes = dict(QUICK if args.quick else FULL)
    for key in ("events", "batch_events", "repeat", "backlog", "peer_jobs"):
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    if args.workers:
        sizes["workers"] = tuple(int(n) for n in args.workers.split(","))
    unknown = set(args.only.split(",")) - set(SECTIONS + OPTIONAL)
    if unknown:
        parser.error(f"--only: unknown section(s) {', '.join(sorted(unknown))}")
    return args, sizes


def main() -> None:
    args, sizes = arguments()
    only = args.only.split(",")
    rtts = [float(x) for x in args.rtt_ms.split(",")]
    results: dict[str, Any] = {"sizes": sizes, "rtt_ms": rtts, "python": sys.version.split()[0],
                               "machine": platform.platform(), "cpus": os.cpu_count(),
                               "load_average_start": os.getloadavg(), "throughput": {}, "claim_ms": {}}
    began = time.monotonic()
    with postgres(args.url, args.shared_buffers) as server, \
            tempfile.TemporaryDirectory(prefix="fairq-bench-") as folder:
        results["server"] = found = settings(server)
        results["postgres_fsync"] = found["fsync"]
        print(f"# PostgreSQL {found['server_version']}: fsync={found['fsync']}, synchronous_commit="
              f"{found['synchronous_commit']}, shared_buffers={found['shared_buffers']}; {os.cpu_count()} CPUs; "
              f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min)")
        print(f"# drains: {sizes['events']} single events, {sizes['batch_events']} in batches of {CLAIM_BATCH}, "
              f"over {FLOWS} fairq flows (batches: 5 x processes x batch); processes {','.join(map(str, sizes['workers']))}; "
              f"RTT {args.rtt_ms} ms; {sizes['repeat']} run(s) per cell")
        if "drains" in only:
            run_drains(server, sizes, rtts, results)
        if "trips" in only:
            parts = urllib.parse.urlsplit(server)
            results["round_trips"] = verbs = pg_trips.per_verb(server, parts.hostname or "127.0.0.1",
                                                               parts.port or 5432)
            print("\n## Round trips per verb (warm queue, counted on the wire)\n", *pg_report.trips(verbs), sep="\n")
        targets = Targets(server, folder)
        if "cost" in only:
            run_claim_cost(targets, sizes, results)
        if "worker" in only and not (args.quick and args.only == ",".join(SECTIONS)):
            run_worker(targets, sizes, results)
        if "peers" in only:
            pg_peers.run(server, sizes["peer_jobs"], sizes["repeat"], results)
        if "tenants" in only:
            results["tenants"] = tenant_bench.run(lambda: targets.fresh("postgres"),
                                                  tenant_bench.sizes_from(args, args.quick, TENANT_FLAGS),
                                                  sizes["repeat"], progress, prepare=analyze)
            print("\n## Tenants\n", *tenant_bench.table(results["tenants"]), sep="\n")
    results["load_average_end"] = os.getloadavg()
    results["seconds"] = time.monotonic() - began
    print(f"\n# {results['seconds']:.0f} s; load average at the end "
          f"{'/'.join(f'{x:.1f}' for x in results['load_average_end'])}")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
