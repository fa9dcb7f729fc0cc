"""A handler module for `fairq work`, and a backlog to try it on.

    python examples/handlers.py --fill 2000        # enqueue 2000 orders into $FAIRQ_DB, else ./fairq.db
    fairq work examples.handlers:handle            # handle them; Ctrl-C stops cleanly
    fairq work examples.handlers:handle --concurrency 4 --batch 50

Both open the same database: --db, else $FAIRQ_DB, else ./fairq.db.

The handler shows the contract: returning acks the event, raising
fairq.Retry retries it, raising fairq.Fail quarantines it (it then blocks
its flow until `fairq redrive`), and any other exception is a retry whose
reason is the exception's type and message.
"""

from __future__ import annotations

import argparse
import random
import time

import fairq
from fairq.cli import database_path

SKUS = ("book", "pen", "bag")


def handle(job: fairq.Job) -> None:
    """Check an order and 'charge' it (a short sleep stands in for the work)."""
    order = job.body
    if order.get("sku") not in SKUS:
        raise fairq.Fail(f"unknown sku {order.get('sku')!r}")
    if order.get("flaky") and job.attempts < 2:
        raise fairq.Retry("payment service busy", delay=0.1)
    for _ in range(5):
        if job.lost:  # the lease is gone: another worker owns the order now
            return
        time.sleep(order.get("work_ms", 2) / 5000)


def fill(path: str, n: int) -> None:
    """Enqueue n orders spread over 20 tenants (flows), a few of them flaky or bad."""
    rng = random.Random(7)
    with fairq.Queue(path) as q:
        items = []
        for i in range(n):
            order = {"sku": rng.choice(SKUS), "cents": rng.randint(100, 9999), "work_ms": rng.randint(1, 10)}
            if i % 50 == 7:
                order["flaky"] = True
            if i % 500 == 499:
                order["sku"] = "toy"
            items.append({"event_id": f"order-{i}", "body": order, "flow": f"tenant-{i % 20}"})
        for start in range(0, n, 1000):
            q.enqueue_many(items[start:start + 1000])
        print(f"{path}: {q.stats().counts}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="database file (default: $FAIRQ_DB, else ./fairq.db)")
    parser.add_argument("--fill", type=int, default=1000, metavar="N", help="orders to enqueue")
    args = parser.parse_args()
    fill(database_path(args.db), args.fill)
