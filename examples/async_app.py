"""An asyncio program: request handlers enqueue orders, an AsyncWorker drains them.

Three customers place 30 orders through request-like coroutines that run
concurrently (as a web framework would run them); each order is enqueued to
its customer's flow with `await q.enqueue(...)`, so one customer's orders are
handled in the order placed while customers are served fairly. An
AsyncWorker with 8 concurrent handler tasks then drains the queue: a handler
awaits a (simulated) payment call, a declined card fails its order (it is
quarantined and blocks only that customer's flow), and a gateway timeout is
retried once.

    python examples/async_app.py            # print what happened
    python examples/async_app.py --check    # and exit 1 on any difference from EXPECTED
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import fairq
import fairq.aio

CUSTOMERS = ("ada", "bob", "cy")
EXPECTED: dict[str, Any] = {
    "enqueued": 30,
    "counts": {"claimed": 29, "acked": 27, "retried": 1, "released": 0, "quarantined": 1, "lost": 0,
               "abandoned": 0},
    "states": {"ready": 2, "inflight": 0, "acked": 27, "quarantined": 1, "discarded": 0},  # bob-08, bob-09 wait behind bob-07
    "charged": {"ada": 1000, "bob": 700, "cy": 1000},
    "in_order": True,
}


async def place_order(q: fairq.aio.AsyncQueue, customer: str, n: int) -> fairq.Enqueued:
    """A request handler: validate, then enqueue (a retried request with the same id is a no-op)."""
    await asyncio.sleep(0)  # requests interleave; enqueues commit in the order they are awaited
    return await q.enqueue(f"{customer}-{n:02d}", {"customer": customer, "n": n, "cents": 100}, flow=customer)


def make_handler(charged: dict[str, int], seen: dict[str, list[int]]) -> Any:
    async def charge(job: fairq.Job) -> None:
        """Charge one order: await the payment gateway; decline -> Fail, gateway timeout -> Retry."""
        customer, n = job.body["customer"], job.body["n"]
        await asyncio.sleep(0.002)  # the payment call
        if customer == "bob" and n == 7:
            raise fairq.Fail("card declined")  # quarantined: bob's later orders wait for a redrive
        if customer == "cy" and n == 3 and job.attempts == 1:
            raise fairq.Retry("gateway timeout", delay=0.05)
        seen[customer].append(job.seq)
        charged[customer] += job.body["cents"]

    return charge


async def story(path: Path) -> dict[str, Any]:
    charged = dict.fromkeys(CUSTOMERS, 0)
    seen: dict[str, list[int]] = {c: [] for c in CUSTOMERS}
    async with fairq.aio.AsyncQueue(path, max_attempts=3) as q:
        made = await asyncio.gather(*(place_order(q, c, n) for n in range(10) for c in CUSTOMERS))
        worker = fairq.aio.AsyncWorker(q, make_handler(charged, seen), concurrency=8, idle_max=0.05)
        counts = await worker.run(until_empty=True, signals=False)
        states = (await q.stats()).counts
    return {"enqueued": sum(e.created for e in made), "counts": counts, "states": states, "charged": charged,
            "in_order": all(seqs == sorted(seqs) for seqs in seen.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if anything differs from EXPECTED")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        result = asyncio.run(story(Path(directory) / "orders.db"))
    print(json.dumps(result, sort_keys=True))
    diffs = [key for key, value in EXPECTED.items() if result[key] != value]
    for key in diffs:
        print(f"DIFF {key}: {json.dumps(result[key], sort_keys=True)} (expected {json.dumps(EXPECTED[key])})")
    print(f"{len(EXPECTED) - len(diffs)}/{len(EXPECTED)} results as expected")
    return 1 if args.check and diffs else 0


if __name__ == "__main__":
    sys.exit(main())
