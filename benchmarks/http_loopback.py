"""Requests per second for claim + ack through `fairq serve` over loopback.

    python benchmarks/http_loopback.py                 # 2000 events, 1 and 2 client processes
    python benchmarks/http_loopback.py --events 500

Starts a real `fairq serve` process on a fresh database (synchronous="full")
and drains it with fairq.Client workers in other processes, each doing
claim then ack (two requests per event, one transaction each). The figure
describes this machine on this day only: client, server and SQLite share
its cores. Standard library only.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import fairq  # noqa: E402

TOKEN = "benchmark-token"
SPAWN = multiprocessing.get_context("spawn")


def drain(url: str, barrier, out) -> None:
    client = fairq.Client(url, token=TOKEN)
    barrier.wait()
    done = 0
    while (lease := client.claim(owner=str(os.getpid()))) is not None:
        client.ack(lease)
        done += 1
    out.put(done)


def run(events: int, workers: int) -> float:
    with tempfile.TemporaryDirectory(prefix="fairq-http-") as tmp:
        env = {**os.environ, "FAIRQ_TOKEN": TOKEN, "PYTHONPATH": str(ROOT / "src")}
        server = subprocess.Popen([sys.executable, "-m", "fairq", "--db", f"{tmp}/q.db", "serve", "--port", "0"],
                                  env=env, stdout=subprocess.PIPE, text=True)
        try:
            url = server.stdout.readline().rsplit(" at ", 1)[1].strip()
            fairq.Client(url, token=TOKEN).enqueue_many(
                [(f"e{i}", {"i": i}, f"flow-{i % 50}") for i in range(events)])
            barrier, out = SPAWN.Barrier(workers + 1), SPAWN.Queue()
            procs = [SPAWN.Process(target=drain, args=(url, barrier, out)) for _ in range(workers)]
            for p in procs:
                p.start()
            barrier.wait()
            start = time.perf_counter()
            total = sum(out.get() for _ in procs)
            elapsed = time.perf_counter() - start
            for p in procs:
                p.join()
        finally:
            server.terminate()
            server.wait()
    assert total == events, (total, events)
    return 2 * events / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    args = parser.parse_args()
    for workers in (1, 2):
        print(f"{workers} client process(es): {run(args.events, workers):,.0f} requests/s (claim + ack)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
