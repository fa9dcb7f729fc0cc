"""Concurrent callers: how group commit scales and how fair the write lock is.

    python benchmarks/contention.py --quick      # every figure once, small sizes
    python benchmarks/run.py                     # includes these rows

Four figures, each a ratio measured within one run:

* serve: claim+ack requests/s through a real `fairq serve` process, with 8
  client processes ÷ with 1 (every process on the same cores);
* worker: a threaded Worker (batch=1, a handler that sleeps 1 ms), events/s
  at concurrency=8 ÷ concurrency=1;
* drain: 4 processes each with 4 threads draining one file, events/s (run.py
  divides it by the reference queue's 4-process drain);
* fairness: 4 processes claim and ack with a no-op handler over 4 flows of
  equal weight for a while; the worst flow's share of the acks ÷ the mean share.

`--only lone` also times another process's lone enqueue while 4 processes
claim and ack as fast as they can (milliseconds, median and p99).

Standard library only. Set FAIRQ_SRC to time another checkout's src folder.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = os.environ.get("FAIRQ_SRC") or str(ROOT / "src")
sys.path.insert(0, SRC)

import fairq  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
TOKEN = "benchmark-token"


# -- fairq serve: 8 clients ÷ 1 ---------------------------------------------------


def _http_client(url: str, barrier: Any, out: Any) -> None:
    client = fairq.Client(url, token=TOKEN)
    barrier.wait()
    done = 0
    while (lease := client.claim(owner=str(os.getpid()))) is not None:
        client.ack(lease)
        done += 2
    out.put(done)


def serve_requests_per_s(folder: str, events: int, clients: int) -> float:
    """claim+ack requests/s through `fairq serve` with `clients` client processes."""
    return serve_figures(folder, events, clients)[0]


def _cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) a process has used so far; None where /proc is missing."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_figures(folder: str, events: int, clients: int) -> tuple[float, float | None]:
    """claim+ack requests/s through `fairq serve` with `clients` client processes, and the
    server process's CPU milliseconds per request (None where it cannot be read)."""
    env = {**os.environ, "FAIRQ_TOKEN": TOKEN, "PYTHONPATH": SRC}
    path = os.path.join(folder, f"serve-{clients}-{time.monotonic_ns()}.db")
    server = subprocess.Popen([sys.executable, "-m", "fairq", "--db", path, "serve", "--port", "0"],
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().rsplit(" at ", 1)[1].strip()
        fairq.Client(url, token=TOKEN).enqueue_many(
            [(f"e{i}", {"i": i}, f"flow-{i % 50}") for i in range(events)])
        barrier, out = SPAWN.Barrier(clients + 1), SPAWN.Queue()
        procs = [SPAWN.Process(target=_http_client, args=(url, barrier, out)) for _ in range(clients)]
        for p in procs:
            p.start()
        barrier.wait()
        start, cpu_start = time.perf_counter(), _cpu_seconds(server.pid)
        requests = sum(out.get(timeout=600) for _ in procs)
        elapsed, cpu_end = time.perf_counter() - start, _cpu_seconds(server.pid)
        for p in procs:
            p.join()
    finally:
        server.terminate()
        server.wait()
    assert requests == 2 * events, requests
    cpu_ms = None if cpu_start is None or cpu_end is None else 1000 * (cpu_end - cpu_start) / requests
    return requests / elapsed, cpu_ms


# -- a threaded Worker: concurrency=8 ÷ 1 -------------------------------------------


def worker_events_per_s(folder: str, events: int, concurrency: int) -> float:
    """Events/s through Worker(batch=1) with a handler that sleeps 1 ms."""
    path = os.path.join(folder, f"worker-{concurrency}-{time.monotonic_ns()}.db")
    with fairq.Queue(path) as q:
        q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % 100}") for i in range(events)])
        began = time.perf_counter()
        counts = fairq.Worker(q, lambda job: time.sleep(0.001), concurrency=concurrency,
                              batch=1).run(until_idle=True, signals=False)
        elapsed = time.perf_counter() - began
    assert counts["acked"] == events, counts
    return events / elapsed


# -- 4 processes × 4 threads draining one file ---------------------------------------


def drain_loop(q: fairq.Queue, seen: list[str], errors: Counter[str]) -> None:
    """Claim and ack one at a time until 20 claims in a row find nothing;
    what was acked goes to `seen`, every error to `errors` (a benchmark must show none)."""
    idle = 0
    while idle < 20:
        try:
            lease = q.claim()
            if lease is None:
                idle += 1
                time.sleep(0.001)
                continue
            idle = 0
            q.ack(lease)
            seen.append(lease.event_id)
        except Exception as exc:  # counted and reported: the benchmark must show 0
            errors[type(exc).__name__ + ": " + str(exc)[:60]] += 1


def _drain_threads(path: str, threads: int, barrier: Any, out: Any) -> None:
    q = fairq.Queue(path, busy_timeout=60)
    seen: list[str] = []
    errors: Counter[str] = Counter()
    workers = [threading.Thread(target=drain_loop, args=(q, seen, errors)) for _ in range(threads)]
    barrier.wait()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    out.put((seen, dict(errors)))


def timed_drainers(target: Callable[..., None], args: tuple[Any, ...], procs: int,
                   expected: set[Any]) -> dict[str, Any]:
    """Start `procs` processes of target(*args, barrier, out), each reporting (seen, errors)
    on `out`; time them from the barrier to the last report: items/s over `expected`, and
    duplicates, losses and errors (a benchmark must show none)."""
    barrier, out = SPAWN.Barrier(procs + 1), SPAWN.Queue()
    workers = [SPAWN.Process(target=target, args=(*args, barrier, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    results = [out.get(timeout=600) for _ in workers]  # the timeout only stops a hang
    elapsed = time.perf_counter() - start
    for w in workers:
        w.join()
    seen = Counter(x for got, _ in results for x in got)
    errors: Counter[str] = Counter()
    for _, e in results:
        errors.update(e)
    return {"items_per_s": len(expected) / elapsed, "duplicates": sum(n - 1 for n in seen.values() if n > 1),
            "losses": len(expected - set(seen)), "errors": sum(errors.values()), "error_kinds": dict(errors)}


def drain_threads(path: str, events: int, procs: int = 4, threads: int = 4) -> dict[str, Any]:
    """Events/s draining one file with `procs` processes of `threads` threads."""
    with fairq.Queue(path, lease_seconds=600) as q:
        for k in range(0, events, 5000):
            q.enqueue_many([(f"e{i}", {"i": i}) for i in range(k, min(events, k + 5000))])
    return timed_drainers(_drain_threads, (path, threads), procs, {f"e{i}" for i in range(events)})


def drains(path: Any, events: int, repeat: int) -> dict[str, Any]:
    """drain_threads `repeat` times on fresh files path(): the median rate, the summed faults."""
    runs = [drain_threads(path(), events) for _ in range(repeat)]
    return {"items_per_s": statistics.median(r["items_per_s"] for r in runs),
            **{k: sum(r[k] for r in runs) for k in ("duplicates", "losses", "errors")},
            "error_kinds": [r["error_kinds"] for r in runs if r["error_kinds"]]}


# -- fairness under a saturated write lock --------------------------------------------


def _fair_claimer(path: str, seconds: float, barrier: Any, out: Any) -> None:
    q = fairq.Queue(path, busy_timeout=60)
    acked: Counter[str] = Counter()
    barrier.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lease = q.claim()
        if lease is not None:
            q.ack(lease)
            acked[str(lease.flow)] += 1
    out.put(dict(acked))


def fairness(path: str, seconds: float, per_flow: int, procs: int = 4, flows: int = 4) -> dict[str, Any]:
    """Acks per flow when `procs` processes claim and ack (no-op handler) over
    `flows` equal flows for `seconds`; worst share ÷ mean share."""
    with fairq.Queue(path, lease_seconds=600) as q:
        for k in range(0, per_flow * flows, 5000):
            q.enqueue_many([(f"e{i}", {"i": i}, f"flow-{i % flows}")
                            for i in range(k, min(per_flow * flows, k + 5000))])
    barrier, out = SPAWN.Barrier(procs + 1), SPAWN.Queue()
    workers = [SPAWN.Process(target=_fair_claimer, args=(path, seconds, barrier, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    barrier.wait()
    acked: Counter[str] = Counter()
    for _ in workers:
        acked.update(out.get(timeout=600))
    for w in workers:
        w.join()
    per = [acked.get(f"flow-{f}", 0) for f in range(flows)]
    mean = sum(per) / flows
    if max(per) >= per_flow:
        raise RuntimeError(f"a flow ran dry ({per}): enqueue more per flow")
    return {"acks_per_flow": per, "acks_per_s": sum(per) / seconds,
            "worst_share_over_mean": min(per) / mean if mean else 0.0,
            "spread": max(abs(n - mean) for n in per) / mean if mean else 0.0}


# -- another process's lone write beside saturating drainers -------------------------


def _busy_claimer(path: str, stop: Any, barrier: Any, out: Any) -> None:
    q = fairq.Queue(path, busy_timeout=60)
    barrier.wait()
    acked = 0
    while not stop.is_set():
        lease = q.claim()
        if lease is not None:
            q.ack(lease)
            acked += 1
    out.put(acked)


def lone_writer(path: str, writes: int, backlog: int, procs: int = 4) -> dict[str, Any]:
    """Milliseconds one enqueue of this process takes, one every 5 ms, while `procs`
    processes claim and ack as fast as they can (the write lock saturated): median, p99."""
    with fairq.Queue(path, lease_seconds=600) as q:
        for k in range(0, backlog, 5000):
            q.enqueue_many([(f"e{i}", {"i": i}, f"flow-{i % 8}") for i in range(k, min(backlog, k + 5000))])
    stop, barrier, out = SPAWN.Event(), SPAWN.Barrier(procs + 1), SPAWN.Queue()
    workers = [SPAWN.Process(target=_busy_claimer, args=(path, stop, barrier, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    took: list[float] = []
    with fairq.Queue(path, busy_timeout=60) as q:
        barrier.wait()
        began = time.perf_counter()
        for i in range(writes):
            time.sleep(0.005)
            start = time.perf_counter()
            q.enqueue(f"lone-{i}", {})
            took.append(1000 * (time.perf_counter() - start))
        elapsed = time.perf_counter() - began
        stop.set()
        acked = sum(out.get(timeout=600) for _ in workers)
        for w in workers:
            w.join()
        if q.stats().counts["ready"] <= writes:
            raise RuntimeError("the claimers ran dry: enqueue a larger backlog")
    took.sort()
    return {"median_ms": statistics.median(took), "p99_ms": took[int(0.99 * (len(took) - 1))],
            "claimers_acks_per_s": acked / elapsed, "load": os.getloadavg()[0]}


# -- the run -----------------------------------------------------------------------


def run(quick: bool, repeat: int, folder: str) -> dict[str, Any]:
    """Every figure of this file, each the median of `repeat` runs."""
    sizes = {"serve_events": 300 if quick else 1500, "worker_events": 400 if quick else 2000,
             "fair_seconds": 2.0 if quick else 5.0, "fair_per_flow": 6000 if quick else 15000}
    out: dict[str, Any] = {"sizes": sizes}

    def med(fn: Any) -> float:
        return statistics.median(fn() for _ in range(repeat))

    one = med(lambda: serve_requests_per_s(folder, sizes["serve_events"], 1))
    eight = med(lambda: serve_requests_per_s(folder, sizes["serve_events"], 8))
    out["serve"] = {"requests_per_s_1": one, "requests_per_s_8": eight, "ratio": eight / one}
    one = med(lambda: worker_events_per_s(folder, sizes["worker_events"], 1))
    eight = med(lambda: worker_events_per_s(folder, sizes["worker_events"], 8))
    out["worker"] = {"events_per_s_1": one, "events_per_s_8": eight, "ratio": eight / one}
    runs = [fairness(os.path.join(folder, f"fair-{i}.db"), sizes["fair_seconds"], sizes["fair_per_flow"])
            for i in range(repeat)]
    runs.sort(key=lambda r: r["worst_share_over_mean"])
    out["fairness"] = {**runs[len(runs) // 2], "runs": [r["acks_per_flow"] for r in runs]}
    return out


def table(results: dict[str, Any]) -> list[str]:
    s, w, f = results["serve"], results["worker"], results["fairness"]
    return [
        f"| `fairq serve` claim+ack req/s, 8 clients ÷ 1 | {s['requests_per_s_8']:,.0f} | "
        f"{s['requests_per_s_1']:,.0f} | {s['ratio']:.2f} |",
        f"| threaded Worker events/s, concurrency 8 ÷ 1 (batch 1, 1 ms handler) | {w['events_per_s_8']:,.0f} | "
        f"{w['events_per_s_1']:,.0f} | {w['ratio']:.2f} |",
        f"| worst flow's share ÷ mean, 4 processes, 4 equal flows, no-op handler | "
        f"{'/'.join(str(n) for n in f['acks_per_flow'])} | | {f['worst_share_over_mean']:.2f} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--only", choices=("serve", "worker", "drain", "fairness", "lone"), default=None)
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory(prefix="fairq-conc-") as folder:
        if args.only == "fairness":
            for i in range(repeat):
                print(fairness(os.path.join(folder, f"f{i}.db"), 2.0 if args.quick else 5.0,
                               6000 if args.quick else 15000))
        elif args.only == "lone":
            for i in range(repeat):
                print(lone_writer(os.path.join(folder, f"l{i}.db"), 100 if args.quick else 300,
                                  20_000 if args.quick else 40_000))
        elif args.only == "drain":
            for i in range(repeat):
                print(drain_threads(os.path.join(folder, f"d{i}.db"), 2000 if args.quick else 10000))
        elif args.only == "serve":
            for n in (1, 8):
                runs = [serve_figures(folder, 300 if args.quick else 1500, n) for _ in range(repeat)]
                cpu = [c for _, c in runs if c is not None]
                print(f"{n} client(s): {statistics.median(r for r, _ in runs):,.0f} req/s "
                      f"(runs {', '.join(f'{r:,.0f}' for r, _ in runs)}); server CPU "
                      f"{statistics.median(cpu) if cpu else float('nan'):.3f} ms/request, "
                      f"load average {os.getloadavg()[0]:.1f}")
        elif args.only == "worker":
            for n in (1, 8):
                print(n, worker_events_per_s(folder, 400 if args.quick else 2000, n))
        else:
            print("\n".join(table(run(args.quick, repeat, folder))))


if __name__ == "__main__":
    main()
