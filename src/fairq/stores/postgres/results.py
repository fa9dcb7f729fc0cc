"""The SQL of results on PostgreSQL: an ack's result stored in the ack's
transaction, an event's result read with its state, and the waiter rows a
wait registers (table event_result_waiter: a settle or discard of an event named
there notifies the result channel, migrations/verbs.sql and operators.sql).

store_results runs inside the ack's transaction ("settle_result": the settle
is fairq_settle called inside it, so both commit together); the reads run
in a snapshot, or (locked_result) as one locking statement; the waiter rows
are written one autocommit statement at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...kernel.records import StoredResult
from ...types import State
from .connection import PgDatabase
from .txn import TxnCore

#: Rows of waits older than this are taken for left by a process that died.
WAITER_STALE = "1 hour"

_SELECT_RESULT = ("SELECT e.state, e.reason, r.body FROM event AS e "
                  "LEFT JOIN event_result AS r ON r.event_pk = e.id WHERE e.event_id = %(event_id)s")


def store_results(tx: TxnCore, items: Sequence[tuple[str, str]], *, now_ms: int) -> None:
    """Store (event_id, canonical JSON) for each event this transaction acked."""
    # Only an acked event gets a result, and an acked event is final: its
    # result is written once, in the transaction of its ack, and never changes.
    tx.execute(
        "INSERT INTO event_result (event_pk, body, created_ms) SELECT e.id, r.body, %(now_ms)s "
        "FROM unnest(%(ids)s::text[], %(bodies)s::text[]) AS r(event_id, body) "
        "JOIN event AS e ON e.event_id = r.event_id WHERE e.state = 'acked'",
        {"ids": [i for i, _ in items], "bodies": [b for _, b in items], "now_ms": now_ms})


def stored_result(row: Any) -> StoredResult | None:
    return None if row is None else StoredResult(State(row[0]), row[1], row[2])


def read_result(conn: Any, event_id: str) -> StoredResult | None:
    """The event's state, reason and result (None: no such event), in the snapshot."""
    # By the event_id key, then the result's.
    return stored_result(conn.execute(_SELECT_RESULT, {"event_id": event_id}).fetchone())


def locked_result(db: PgDatabase, event_id: str) -> StoredResult | None:
    """read_result once any transaction that has changed the event has ended:
    a settle that began before a waiter's row was committed, and so did not
    notify it, has committed (or rolled back) by the time this answers."""
    # FOR SHARE waits for the row's writer, then reads its newest version.
    rows = db.statement("result_look", _SELECT_RESULT + " FOR SHARE OF e", {"event_id": event_id})
    return stored_result(rows[0] if rows else None)


def register(db: PgDatabase, event_id: str, token: str) -> None:
    """Record a wait for the event (committed before the caller looks at it)."""
    # Rows a process left when it died go first (they only cost spare notices).
    db.statement("result_wait",
                 "WITH stale AS (DELETE FROM event_result_waiter WHERE since < now() - %(stale)s::interval) "
                 "INSERT INTO event_result_waiter (event_id, token) VALUES (%(event_id)s, %(token)s) RETURNING 1",
                 {"event_id": event_id, "token": token, "stale": WAITER_STALE})


def unregister(db: PgDatabase, event_id: str, token: str) -> None:
    """The wait is over: settles of the event notify no one for it any more."""
    db.statement("result_wait", "DELETE FROM event_result_waiter WHERE event_id = %(event_id)s "
                 "AND token = %(token)s RETURNING 1", {"event_id": event_id, "token": token})
