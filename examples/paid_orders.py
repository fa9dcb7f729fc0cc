"""A paid-orders pipeline: totals counted exactly once, whatever happens.

Events about paid orders arrive as JSONL. A handler adds each order's amount
to an `effects` table that lives in the queue's own SQLite file, and writes
that row in the same transaction as the ACK (`q.ack(lease, effect=...)`):
so a repeated line, a retried event or a handler that dies between its INSERT
and the COMMIT can never count an order twice or lose one.

    python examples/paid_orders.py              # the story, step by step (model clock)
    python examples/paid_orders.py --check      # ... and exit 1 if any number differs
    python examples/paid_orders.py work [--accept toy]   # handle what $FAIRQ_DB (or --db) holds now

The story runs on a model clock (seconds 1000 to 1004 passed as `now=`), so it
prints the same every run and never sleeps; the E0003 handler is a real child
process that dies with os._exit(86) after its INSERT, before COMMIT. `work`
uses the wall clock and is what README's shell walkthrough runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import fairq
from fairq.cli import database_path

CATEGORIES = ("book", "pen", "bag")
MAX_AMOUNT = 9_999_999
LEASE = 2.0  # seconds: E0003's lease, taken at 1000, ends at 1002
BACKOFF = fairq.Backoff(base=1, factor=2, cap=60, jitter=False)  # a transient error waits 1 s, then 2 s
MAX_ATTEMPTS = 3  # after the third claim of a round the event is quarantined
CRASH_CODE = 86

# The envelope a file of orders must fit, as fairq.Queue.ingest limits.
LIMITS = {"max_bytes": 1_000_000, "max_lines": 1000, "max_body_bytes": 10_000, "id_pattern": r"E[0-9]{4}"}

ORDERS = b"".join(
    json.dumps({"event_id": event_id, "body": {"category": category, "amount_cents": cents}}).encode() + b"\n"
    for event_id, category, cents in [("E0001", "book", 10000), ("E0001", "book", 10000),
                                      ("E0002", "pen", 2000), ("E0003", "book", 5000),
                                      ("E0004", "toy", 3000)]
)

# The application's own table, in the queue's file. No foreign key to fairq's
# tables: what ties an effect to its event is the transaction it commits in.
EFFECTS = """
CREATE TABLE IF NOT EXISTS effects (
    event_id      TEXT PRIMARY KEY,
    category      TEXT NOT NULL CHECK (length(category) > 0),
    amount_cents  INTEGER NOT NULL CHECK (amount_cents BETWEEN 1 AND 9999999)
) STRICT
"""


class InvalidPayload(Exception):
    """The event is well-formed JSON but not an order this handler understands."""


def validate(body: Any, categories: tuple[str, ...]) -> tuple[str, int]:
    """(category, amount_cents) of an order, or InvalidPayload saying what is wrong."""
    if not isinstance(body, dict):
        raise InvalidPayload(f"body must be an object, not {type(body).__name__}")
    category, amount = body.get("category"), body.get("amount_cents")
    if not isinstance(category, str):  # before the membership test: a list is not hashable
        raise InvalidPayload(f"category must be a string, not {type(category).__name__}")
    if category not in categories:
        raise InvalidPayload(f"category {category!r} is not one of {', '.join(categories)}")
    if isinstance(amount, bool) or not isinstance(amount, int):  # bool is an int in Python
        raise InvalidPayload(f"amount_cents must be an integer, not {type(amount).__name__}")
    if not 1 <= amount <= MAX_AMOUNT:
        raise InvalidPayload(f"amount_cents must be between 1 and {MAX_AMOUNT}, got {amount}")
    return category, amount


class Shop:
    """The queue and the effects table, in one SQLite file, and the handler."""

    def __init__(self, path: Path | str, categories: tuple[str, ...] = CATEGORIES, *,
                 policy: bool = True) -> None:
        self.path = path
        self.categories = categories
        # The story's file is made with this example's retry policy; `work`
        # (policy=False) runs on the file the shell made, under the policy stored there.
        given = {"lease_seconds": LEASE, "max_attempts": MAX_ATTEMPTS, "backoff": BACKOFF} if policy else {}
        self.queue = fairq.Queue(path, **given)
        with self._connect() as conn:
            conn.execute(EFFECTS)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def handle(self, lease: fairq.Lease, *, now: float | None = None, transient: bool = False,
               die_before_commit: bool = False) -> str:
        """Settle one leased order; returns what became of it."""
        try:
            category, amount = validate(lease.body, self.categories)
        except InvalidPayload as exc:  # permanent: retrying cannot help, quarantine at once
            self.queue.fail(lease, f"invalid_payload: {exc}", now=now)
            return "quarantined (invalid_payload)"
        if transient:
            settled = self.queue.retry(lease, "transient: payment service unavailable", now=now)
            return f"retry at {settled.next_at:g}"

        def effect(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO effects (event_id, category, amount_cents) VALUES (:id, :category, :amount)",
                         {"id": lease.event_id, "category": category, "amount": amount})
            if die_before_commit:
                os._exit(CRASH_CODE)  # a real death: no finally, no rollback, no COMMIT

        self.queue.ack(lease, effect=effect, now=now)
        return "done"

    def step(self, now: float | None = None, **how: bool) -> str:
        """Claim the next order and handle it: 'E0001: done', or 'idle'."""
        lease = self.queue.claim(owner=f"pid{os.getpid()}", now=now)
        if lease is None:
            return "idle"
        return f"{lease.event_id}: {self.handle(lease, now=now, **how)}"

    def totals(self) -> dict[str, int]:
        """Money per category and in total, and how many effects were written."""
        conn = self._connect()
        try:
            rows = conn.execute("SELECT category, sum(amount_cents), count(*) FROM effects "
                                "GROUP BY category ORDER BY category").fetchall()
        finally:
            conn.close()
        out = {category: cents for category, cents, _ in rows}
        out["total"] = sum(cents for _, cents, _ in rows)
        out["effects"] = sum(n for _, _, n in rows)
        return out

    def snapshot(self) -> dict[str, Any]:
        counts = self.queue.stats().counts
        return {"totals": self.totals(), "states": {s: n for s, n in counts.items() if n}}

    def ingest(self, data: bytes, now: float) -> dict[str, Any]:
        try:
            done = self.queue.ingest(data, now=now, **LIMITS)
        except fairq.FairqError as exc:
            return {"refused": str(exc)}
        created = sum(e.created for e in done)
        return {"lines": len(done), "created": created, "duplicates": len(done) - created}


# -- the story: repeats, a retry, a crash before COMMIT, a quarantine, a redrive


def story(directory: Path) -> dict[str, Any]:
    """Every step of the story; returns what each step saw."""
    shop = Shop(directory / "shop.db")
    seen: dict[str, Any] = {"ingest": shop.ingest(ORDERS, now=1000)}

    seen["1000"] = [shop.step(1000), shop.step(1000, transient=True)]
    child = subprocess.run([sys.executable, __file__, "child", str(shop.path)],
                           capture_output=True, text=True, timeout=60)  # the timeout only stops a hang
    info = shop.queue.get("E0003")
    seen["1000 child"] = {"exit": child.returncode, "E0003": [info.state.value, info.generation]}
    first_e0004 = shop.queue.claim(owner="first-worker", now=1000)  # kept: its holder comes back later
    seen["1000"].append(f"{first_e0004.event_id}: {shop.handle(first_e0004, now=1000)}")
    seen["after 1000"] = shop.snapshot()

    seen["1001"] = [shop.step(1001), shop.step(1001)]  # E0003's lease still runs until 1002
    seen["1002"] = [shop.step(1002), shop.step(1002)]
    seen["E0003 generation"] = shop.queue.get("E0003").generation
    seen["after 1002"] = shop.snapshot()

    seen["ingest again"] = shop.ingest(ORDERS, now=1002)
    seen["conflicting batch"] = shop.ingest(
        b'{"event_id": "E0005", "body": {"category": "bag", "amount_cents": 700}}\n'
        b'{"event_id": "E0001", "body": {"category": "book", "amount_cents": 19000}}\n', now=1002)
    seen["E0005 stored"] = shop.queue.get("E0005") is not None
    seen["after re-ingest"] = shop.snapshot()

    shop.queue.redrive("E0004", expected_generation=first_e0004.generation, reason="try again", now=1003)
    seen["1003 redrive without toy support"] = shop.step(1003)

    shop.categories = CATEGORIES + ("toy",)
    again = shop.queue.get("E0004")
    generation = shop.queue.redrive("E0004", expected_generation=again.generation,
                                    reason="toy is sold now", actor="operator", now=1004)
    try:  # the first cycle's worker wakes up: a new round does not give it back the right to ACK
        shop.queue.ack(first_e0004, now=1004)
        seen["1004 old lease"] = "acked"
    except fairq.StaleLease:
        seen["1004 old lease"] = "stale"
    lease = shop.queue.claim(now=1004)
    seen["1004"] = {"redrive": generation, "claim": [lease.event_id, lease.generation, lease.attempts],
                    "settle": shop.handle(lease, now=1004)}
    seen["final"] = shop.snapshot()
    seen["audit E0004"] = [[a.action, a.reason] for a in shop.queue.audit("E0004")]
    shop.queue.close()
    return seen


EXPECTED: dict[str, Any] = {
    "ingest": {"lines": 5, "created": 4, "duplicates": 1},
    "1000": ["E0001: done", "E0002: retry at 1001", "E0004: quarantined (invalid_payload)"],
    "1000 child": {"exit": CRASH_CODE, "E0003": ["inflight", 1]},
    "after 1000": {"totals": {"book": 10000, "total": 10000, "effects": 1},
                   "states": {"ready": 1, "inflight": 1, "acked": 1, "quarantined": 1}},
    "1001": ["E0002: done", "idle"],
    "1002": ["E0003: done", "idle"],
    "E0003 generation": 2,
    "after 1002": {"totals": {"book": 15000, "pen": 2000, "total": 17000, "effects": 3},
                   "states": {"acked": 3, "quarantined": 1}},
    "ingest again": {"lines": 5, "created": 0, "duplicates": 5},
    "conflicting batch": {"refused": "line 2: event 'E0001' is already stored with a different body"},
    "E0005 stored": False,
    "after re-ingest": {"totals": {"book": 15000, "pen": 2000, "total": 17000, "effects": 3},
                        "states": {"acked": 3, "quarantined": 1}},
    "1003 redrive without toy support": "E0004: quarantined (invalid_payload)",
    "1004 old lease": "stale",
    "1004": {"redrive": 4, "claim": ["E0004", 5, 1], "settle": "done"},
    "final": {"totals": {"book": 15000, "pen": 2000, "toy": 3000, "total": 20000, "effects": 4},
              "states": {"acked": 4}},
    "audit E0004": [
        ["quarantine", "invalid_payload: category 'toy' is not one of book, pen, bag"],
        ["redrive", "try again"],
        ["quarantine", "invalid_payload: category 'toy' is not one of book, pen, bag"],
        ["redrive", "toy is sold now"],
    ],
}


def child(path: str) -> int:
    """E0003's handler in its own process: it claims, INSERTs, and dies before COMMIT."""
    shop = Shop(path)
    print(shop.step(1000, die_before_commit=True))  # never returns
    return 0


# -- the command line ------------------------------------------------------------


def check(seen: dict[str, Any]) -> int:
    failed = 0
    for step, value in json.loads(json.dumps(seen)).items():
        ok = value == EXPECTED.get(step)
        failed += not ok
        print(f"{'ok  ' if ok else 'DIFF'} {step}: {json.dumps(value)}")
        if not ok:
            print(f"     expected: {json.dumps(EXPECTED.get(step))}")
    missing = set(EXPECTED) - set(seen)
    for step in sorted(missing):
        print(f"DIFF {step}: missing")
    failed += len(missing)
    print(f"{len(EXPECTED) - failed}/{len(EXPECTED)} steps as expected")
    return failed


def work(path: str, accept: list[str]) -> int:
    """Handle every order claimable now (wall clock), then print the totals."""
    shop = Shop(path, CATEGORIES + tuple(accept), policy=False)
    while (said := shop.step()) != "idle":
        print(said)
    print(json.dumps(shop.snapshot()))
    shop.queue.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if any step differs from EXPECTED")
    sub = parser.add_subparsers(dest="mode")
    p = sub.add_parser("work", help="handle what the database holds now, then print the totals")
    p.add_argument("--db", help="database file (default: $FAIRQ_DB, else ./fairq.db)")
    p.add_argument("--accept", action="append", default=[], metavar="CATEGORY",
                   help="also accept this category (repeatable)")
    sub.add_parser("child").add_argument("path")
    args = parser.parse_args(argv)
    if args.mode == "child":
        return child(args.path)
    if args.mode == "work":
        return work(database_path(args.db), args.accept)
    with tempfile.TemporaryDirectory(prefix="paid-orders-") as directory:
        failed = check(story(Path(directory)))
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
