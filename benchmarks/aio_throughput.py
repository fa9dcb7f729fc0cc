"""Events per second through fairq.aio.AsyncWorker with a no-op coroutine handler, beside fairq.Worker's.

    python benchmarks/aio_throughput.py                        # concurrency 1, 16, 64; batch 1
    python benchmarks/aio_throughput.py --events 5000 --batch 10 --synchronous normal

Each run enqueues `events` events over 100 flows into a fresh file in a
temporary folder and times run(until_idle=True): first the sync Worker (one
thread, `lambda job: None`), then AsyncWorker at each concurrency (`async
def handle(job): pass`). All calls of one AsyncQueue take turns on its one
database thread, so concurrency overlaps handlers' awaits, not transactions.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import fairq
import fairq.aio


async def noop(job: fairq.Job) -> None:
    pass


def fill(path: Path, events: int, synchronous: str) -> fairq.Queue:
    q = fairq.Queue(path, synchronous=synchronous)
    q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % 100}") for i in range(events)])
    return q


def measure_sync(path: Path, events: int, batch: int, synchronous: str) -> float:
    with fill(path, events, synchronous) as q:
        began = time.perf_counter()
        counts = fairq.Worker(q, lambda job: None, batch=batch).run(until_idle=True, signals=False)
        elapsed = time.perf_counter() - began
    assert counts["acked"] == events, counts
    return events / elapsed


def measure_async(path: Path, events: int, batch: int, synchronous: str, concurrency: int) -> float:
    async def drain() -> tuple[dict[str, Any], float]:
        async with fairq.aio.AsyncQueue(fill(path, events, synchronous)) as q:
            worker = fairq.aio.AsyncWorker(q, noop, concurrency=concurrency, batch=batch)
            began = time.perf_counter()
            counts = await worker.run(until_idle=True, signals=False)
            return counts, time.perf_counter() - began

    counts, elapsed = asyncio.run(drain())
    assert counts["acked"] == events, counts
    return events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full")
    parser.add_argument("--dir", help="make the temporary folder here (the disk under test)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        rate = measure_sync(Path(folder) / "sync.db", args.events, args.batch, args.synchronous)
        print(f"Worker       threads=1   batch={args.batch} synchronous={args.synchronous}: {rate:8.0f} events/s")
        for n in args.concurrency:
            rate = measure_async(Path(folder) / f"aio{n}.db", args.events, args.batch, args.synchronous, n)
            print(f"AsyncWorker  concurrency={n:<3} batch={args.batch} synchronous={args.synchronous}: "
                  f"{rate:8.0f} events/s")


if __name__ == "__main__":
    main()
