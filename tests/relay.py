"""A receiver for relay tests: an Inbox plus a projection of summed deltas.

It mirrors the fair relay's counting business (examples/fair_relay.py): each accepted event adds its delta to
its flow's total, in seq order, in the same transaction as the receipt.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import fairq

# What the sender does with each answer from the receiver.
OUTCOME = {
    "accepted": "ack",
    "duplicate": "ack",
    "id_conflict": "fail",
    "sequence_conflict": "fail",
    "unsupported_delta": "fail",
    "gap": "retry",
    "unavailable": "retry",
}


class Receiver:
    def __init__(self, path: Path, *, max_delta: int = 1000) -> None:
        self.path = path
        self.max_delta = max_delta
        self.sends = 0
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS projection "
                "(flow TEXT PRIMARY KEY, total INTEGER NOT NULL, last_seq INTEGER NOT NULL)"
            )
        conn.close()
        self.inbox = fairq.Inbox(path)

    def send(self, lease: fairq.Lease) -> str:
        self.sends += 1
        delta = lease.body["delta"]
        if delta > self.max_delta:
            return "unsupported_delta"

        def add(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO projection (flow, total, last_seq) VALUES (:flow, :delta, :seq) "
                "ON CONFLICT (flow) DO UPDATE SET total = total + :delta, last_seq = :seq",
                {"flow": lease.flow, "delta": delta, "seq": lease.seq},
            )

        return self.inbox.receive(lease.event_id, lease.flow, lease.seq, lease.body, apply=add).value

    def projection(self) -> dict[str, tuple[int, int]]:
        conn = sqlite3.connect(self.path)
        try:
            return {f: (t, s) for f, t, s in conn.execute("SELECT flow, total, last_seq FROM projection")}
        finally:
            conn.close()

    def receipts(self) -> int:
        return self.inbox.received()

    def close(self) -> None:
        self.inbox.close()


def step(q: fairq.Queue, receiver: Receiver, *, now: float) -> tuple[str, str] | None:
    """One relay step: claim, send, settle. (event_id, receiver answer) or None when idle."""
    lease = q.claim(owner="relay", now=now)
    if lease is None:
        return None
    answer = receiver.send(lease)
    outcome = OUTCOME[answer]
    q.settle(lease, outcome, reason=None if outcome == "ack" else answer, now=now)
    return lease.event_id, answer
