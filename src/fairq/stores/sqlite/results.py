"""The SQL of results on SQLite: an ack's result stored in the ack's
transaction, and an event's result read with its state.

Runs inside a queue write transaction (txn.TxnCore) or a read snapshot;
never commits. purge removes a result with its event (maintenance.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...kernel.records import StoredResult
from ...types import State
from .txn import TxnCore


def store_results(tx: TxnCore, items: Sequence[tuple[str, str]], *, now_ms: int) -> None:
    """Store (event_id, canonical JSON) for each event this transaction acked."""
    # Only an acked event gets a result, and an acked event is final: its
    # result is written once, in the transaction of its ack, and never changes.
    tx.connection.executemany(
        "INSERT INTO event_result (event_pk, body, created_ms) "
        "SELECT id, :body, :now_ms FROM event WHERE event_id = :event_id AND state = 'acked'",
        [{"event_id": event_id, "body": body, "now_ms": now_ms} for event_id, body in items],
    )


def read_result(conn: sqlite3.Connection, event_id: str) -> StoredResult | None:
    """The event's state, reason and result (None: no such event)."""
    # By the event_id index, then the result's key; a discarded event's reason
    # is its discard's audit row (the newest, by the audit's event index).
    row = conn.execute(
        "SELECT e.state, CASE WHEN e.state = 'discarded' AND e.reason IS NULL THEN (SELECT a.reason FROM audit AS a "
        "WHERE a.event_id = e.event_id AND a.action = 'discard' ORDER BY a.id DESC LIMIT 1) ELSE e.reason END, "
        "r.body FROM event AS e LEFT JOIN event_result AS r ON r.event_pk = e.id "
        "WHERE e.event_id = :event_id", {"event_id": event_id}).fetchone()
    return None if row is None else StoredResult(State(row[0]), row[1], row[2])
