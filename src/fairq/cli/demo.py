"""`fairq demo`: a short fair relay, told step by step.

The command registers here and the story is told here too; nothing else in
fairq imports it.

Three tenants' flows go through one queue to a receiver with an Inbox. Flow A's
head asks for more than the receiver allows and is quarantined; B and C keep
moving; an operator raises the limit and redrives A's head; everything ends
acked, each effect applied once. Uses only the public API; logical times, so
it prints the same every run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
from collections.abc import Callable

from ..errors import Conflict, FairqError
from ..inbox import Inbox
from ..kernel.policy import Backoff
from ..api.queue import Queue
from ..types import Outcome, Receipt

Say = Callable[[str], None]


def run_demo(directory: str, say: Say = print) -> dict[str, int]:
    """Run the scenario in `directory` (queue.db + receiver.db); return the totals."""
    queue_path = os.path.join(directory, "queue.db")
    receiver_path = os.path.join(directory, "receiver.db")
    limit = {"delta": 5}

    with Queue(queue_path, lease_seconds=5, max_attempts=3,
               backoff=Backoff(base=2, factor=2, cap=8, jitter=False)) as q, \
            Inbox(receiver_path) as inbox:
        _create_totals(receiver_path)
        say(f"queue: {queue_path}\nreceiver: {receiver_path}\n")
        events = [("A1", "A", 10), ("A2", "A", 1), ("B1", "B", 2), ("B2", "B", 3),
                  ("C1", "C", 4), ("C2", "C", 1)]
        for event_id, flow, delta in events:
            q.enqueue(event_id, {"delta": delta}, flow=flow, now=0)
        say("enqueued A1 A2 B1 B2 C1 C2 in flows A, B, C (A1 asks for delta 10, the receiver allows 5)")

        def deliver(now: float) -> str | None:
            lease = q.claim(owner="relay", now=now)
            if lease is None:
                return None
            delta = lease.body["delta"]
            if delta > limit["delta"]:
                q.fail(lease, f"unsupported_delta: {delta} > {limit['delta']}", now=now)
                return f"{lease.event_id}: quarantined (unsupported_delta)"

            def add(conn: sqlite3.Connection) -> None:
                conn.execute("UPDATE totals SET total = total + :delta, last_seq = :seq WHERE flow = :flow",
                             {"delta": delta, "seq": lease.seq, "flow": lease.flow})

            receipt = inbox.receive(lease.event_id, lease.flow, lease.seq, lease.body, apply=add)
            q.settle(lease, receipt.outcome, reason=None if receipt.outcome is Outcome.ACK else receipt.value,
                     now=now)
            return f"{lease.event_id}: {receipt.value}, settled {receipt.outcome.value}"

        say("\nclaims at t=0 (a claim takes a turn even when it fails):")
        while (line := deliver(0)) is not None:
            say("  " + line)
        info = q.get("A1")
        assert info is not None
        say(f"\nA2 waits behind its quarantined head: {q.get('A2').state.value}")  # type: ignore[union-attr]
        say(f"A1 is {info.state.value} at generation {info.generation}: {info.reason}")

        limit["delta"] = 1000
        gen = q.redrive("A1", expected_generation=info.generation,
                        reason="receiver now accepts delta up to 1000", actor="operator", now=1)
        say(f"\noperator raised the limit and redrove A1 -> generation {gen}")
        try:
            q.enqueue("A1", {"delta": 11}, flow="A", now=1)
        except Conflict as exc:
            say(f"re-enqueueing A1 with another body is refused: {exc}")
        say("claims at t=1:")
        while (line := deliver(1)) is not None:
            say("  " + line)

        replay = inbox.receive("B1", "B", 1, {"delta": 2})
        say(f"\na late duplicate delivery of B1 is {replay.value}: no second effect")
        assert replay is Receipt.DUPLICATE
        totals = _read_totals(receiver_path)
        stats = q.stats(now=1)
        say(f"totals: {totals}; queue counts: {stats.counts}")
        say(f"audit of A1: {[(a.action, a.reason) for a in q.audit('A1')]}")
        return totals


def _create_totals(path: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS totals (flow TEXT PRIMARY KEY, total INTEGER, last_seq INTEGER)")
        conn.executemany("INSERT OR IGNORE INTO totals VALUES (:flow, 0, 0)",
                         [{"flow": f} for f in "ABC"])
    conn.close()


def _read_totals(path: str) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT flow, total FROM totals ORDER BY flow"))
    finally:
        conn.close()


def main_demo(keep_in: str | None, say: Say = print) -> int:
    """Run the demo in a fresh directory: a temporary one, or `keep_in` if given."""
    if keep_in is not None:
        directory = os.path.abspath(keep_in)
        if os.path.exists(directory) and os.listdir(directory):
            raise FairqError(f"{directory} is not empty; the demo needs a new or empty folder")
        os.makedirs(directory, exist_ok=True)
        run_demo(directory, say)
        return 0
    with tempfile.TemporaryDirectory(prefix="fairq-demo-") as directory:
        run_demo(directory, say)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run a short fair-relay scenario and tell what happened")
    p.add_argument("--keep-in", metavar="DIR",
                   help="run in this new or empty folder and keep its databases (default: a temporary folder)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return main_demo(args.keep_in)
