"""The receiving end of a relay in an SQLite file: receipts checked and written
with the effect, in one transaction (fairq.Inbox uses it for a file path).

The file may hold the application's own tables (the effect writes them); the
inbox only adds tables named fairq_*. Never reads a clock: the time comes in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ...errors import SchemaError
from ...kernel.rules import delivery_verdict
from ...types import Receipt
from .connection import Database, read_script

INBOX_VERSION = 1


class SqliteInbox:
    """Receipts in an SQLite file (fairq.stores.backend.InboxStore)."""

    def __init__(self, path: Any, *, synchronous: str, busy_timeout: float) -> None:
        self.db = Database(path, synchronous=synchronous, busy_timeout=busy_timeout)
        try:
            _ensure_receipts(self.db)
        except BaseException:
            self.db.close()
            raise

    def receive(self, event_id: str, flow: str | None, seq: int, body: str,
                apply: Callable[[Any], Any] | None, now_ms: int) -> Receipt:
        with self.db.write("receive") as conn:
            verdict = _judge(conn, event_id, flow, seq, body)
            if verdict is not None:
                return verdict
            if apply is not None:
                self.db.run_callback(conn, apply, "apply")
            # UNIQUE keys make a racing duplicate fail loudly, not silently.
            conn.execute(
                "INSERT INTO fairq_receipt (event_id, flow, seq, body, received_ms) "
                "VALUES (:event_id, :flow, :seq, :body, :now_ms)",
                {"event_id": event_id, "flow": flow, "seq": seq, "body": body, "now_ms": now_ms})
        return Receipt.ACCEPTED

    def count(self, flow: str | None) -> int:
        if flow is None:
            # Every receipt.
            return self.db.read(lambda conn: int(conn.execute("SELECT count(*) FROM fairq_receipt").fetchone()[0]))
        # One flow's receipts, through the (flow, seq) unique index.
        return self.db.read(lambda conn: int(conn.execute(
            "SELECT count(*) FROM fairq_receipt WHERE flow = :flow", {"flow": flow}).fetchone()[0]))

    def last_seq(self, flow: str) -> int:
        return self.db.read(lambda conn: _last_seq(conn, flow))

    def close(self) -> None:
        self.db.close()


def _ensure_receipts(db: Database) -> None:
    """Create the receipt tables if missing; refuse a newer inbox schema."""
    with db.write("inbox_migrate") as conn:
        db.run_script(conn, read_script("inbox.sql"))
        # One version row, written once by the first inbox to open the file.
        row = conn.execute("SELECT value FROM fairq_inbox_meta WHERE key = 'version'").fetchone()
        if row is None:
            conn.execute("INSERT INTO fairq_inbox_meta (key, value) VALUES ('version', :version)",
                         {"version": INBOX_VERSION})
        elif row[0] > INBOX_VERSION:
            raise SchemaError(
                f"{db.path!s} has fairq inbox schema version {row[0]}, newer than this fairq "
                f"understands ({INBOX_VERSION}); upgrade fairq")


def _judge(conn: sqlite3.Connection, event_id: str, flow: str | None, seq: int, body: str) -> Receipt | None:
    """What a delivery is, before any effect (fairq.kernel.rules.delivery_verdict)."""
    # The receipt under this id, through its primary key.
    found = conn.execute("SELECT flow, seq, body FROM fairq_receipt WHERE event_id = :event_id",
                         {"event_id": event_id}).fetchone()
    last = None if found is not None or flow is None else _last_seq(conn, flow)
    return delivery_verdict(found, flow, seq, body, last)


def _last_seq(conn: sqlite3.Connection, flow: str) -> int:
    # The end of the (flow, seq) unique index for this flow.
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM fairq_receipt WHERE flow = :flow",
                            {"flow": flow}).fetchone()[0])
