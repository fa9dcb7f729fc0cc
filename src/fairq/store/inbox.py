"""All SQL of the receiver side: receipts checked and written with the effect.

Runs inside the caller's transaction (fairq.store.sqlite.Database.write);
never commits, never reads a clock.
"""

from __future__ import annotations

import sqlite3

from ..errors import SchemaError
from ..types import Receipt
from .sqlite import Database, read_script

INBOX_VERSION = 1


def ensure_inbox_schema(db: Database) -> None:
    """Create the receipt tables if missing; refuse a newer inbox schema."""
    with db.write("inbox_migrate") as conn:
        db.run_script(conn, read_script("inbox.sql"))
        # One version row, written once by the first inbox to open the file.
        row = conn.execute(
            "SELECT value FROM fairq_inbox_meta WHERE key = 'version'"
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO fairq_inbox_meta (key, value) VALUES ('version', :version)",
                {"version": INBOX_VERSION},
            )
        elif row[0] > INBOX_VERSION:
            raise SchemaError(
                f"{db.path!s} has fairq inbox schema version {row[0]}, newer than this fairq "
                f"understands ({INBOX_VERSION}); upgrade fairq"
            )


def judge(conn: sqlite3.Connection, event_id: str, flow: str | None, seq: int, body: str) -> Receipt | None:
    """What a delivery is, before any effect: None means new and next in its flow."""
    found = conn.execute(
        "SELECT flow, seq, body FROM fairq_receipt WHERE event_id = :event_id",
        {"event_id": event_id},
    ).fetchone()
    if found is not None:
        # The same id must always carry the same flow, seq and body.
        same = found[0] == flow and found[1] == seq and found[2] == body
        return Receipt.DUPLICATE if same else Receipt.ID_CONFLICT
    if flow is None:
        return None
    # Within a flow, positions are taken in order, one event each.
    last = conn.execute(
        "SELECT max(seq) FROM fairq_receipt WHERE flow = :flow", {"flow": flow}
    ).fetchone()[0] or 0
    if seq <= last:
        return Receipt.SEQUENCE_CONFLICT
    if seq > last + 1:
        return Receipt.GAP
    return None


def record(conn: sqlite3.Connection, event_id: str, flow: str | None, seq: int, body: str, now_ms: int) -> None:
    """Write the receipt; UNIQUE keys make a racing duplicate fail loudly, not silently."""
    conn.execute(
        "INSERT INTO fairq_receipt (event_id, flow, seq, body, received_ms) "
        "VALUES (:event_id, :flow, :seq, :body, :now_ms)",
        {"event_id": event_id, "flow": flow, "seq": seq, "body": body, "now_ms": now_ms},
    )


def count(conn: sqlite3.Connection, flow: str | None) -> int:
    if flow is None:
        # Every receipt.
        return int(conn.execute("SELECT count(*) FROM fairq_receipt").fetchone()[0])
    # One flow's receipts, through the (flow, seq) unique index.
    return int(conn.execute(
        "SELECT count(*) FROM fairq_receipt WHERE flow = :flow", {"flow": flow}
    ).fetchone()[0])


def last_seq(conn: sqlite3.Connection, flow: str) -> int:
    # The end of the (flow, seq) unique index for this flow.
    return int(conn.execute(
        "SELECT coalesce(max(seq), 0) FROM fairq_receipt WHERE flow = :flow", {"flow": flow}
    ).fetchone()[0])
