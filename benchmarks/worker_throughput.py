"""Events per second through fairq.Worker with a trivial handler.

    python benchmarks/worker_throughput.py                 # batch 1 and 100, synchronous=full
    python benchmarks/worker_throughput.py --events 5000 --batch 1 10 100 --synchronous normal

Each run enqueues `events` events over 100 flows into a fresh file in a
temporary folder and times Worker.run(until_idle=True) with one thread.
Numbers depend on the disk's fsync rate and on what else the machine does.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import fairq


def measure(folder: Path, events: int, batch: int, synchronous: str) -> float:
    path = folder / f"b{batch}-{synchronous}.db"
    with fairq.Queue(path, synchronous=synchronous) as q:
        q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % 100}") for i in range(events)])
        began = time.perf_counter()
        counts = fairq.Worker(q, lambda job: None, batch=batch).run(until_idle=True, signals=False)
        elapsed = time.perf_counter() - began
    assert counts["acked"] == events, counts
    return events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full")
    parser.add_argument("--dir", help="make the temporary folder here (the disk under test)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for batch in args.batch:
            rate = measure(Path(folder), args.events, batch, args.synchronous)
            print(f"batch={batch:<4} synchronous={args.synchronous}: {rate:8.0f} events/s")


if __name__ == "__main__":
    main()
