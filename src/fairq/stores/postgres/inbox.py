"""The receiving end of a relay on PostgreSQL: receipts checked and written
with the effect, in one transaction (fairq.Inbox uses it for a URL).

The receipts table (fairq_receipt) lives in the queue schema beside the
application's own tables; an Inbox creates only that table, so the first
Queue opened there creates the queue with its own policy and clock. A delivery takes a transaction-level advisory
lock on its flow (or id), so two receivers of one flow take turns and the
sequence check holds. Never reads a clock: the time comes in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...kernel.rules import delivery_verdict
from ...types import Receipt
from .connection import PgDatabase
from .schema import ensure_receipts

_LOCK_SPACE = 0x6673


class PgInbox:
    """Receipts in a PostgreSQL schema (fairq.stores.backend.InboxStore)."""

    def __init__(self, url: str) -> None:
        self.db = PgDatabase(url)
        try:
            ensure_receipts(self.db)
        except BaseException:
            self.db.close()
            raise

    def receive(self, event_id: str, flow: str | None, seq: int, body: str,
                apply: Callable[[Any], Any] | None, now_ms: int) -> Receipt:
        with self.db.write("receive") as conn:
            # Deliveries of one flow (or one id) take turns.
            conn.execute("SELECT pg_advisory_xact_lock(%(space)s, hashtext(%(key)s))",
                         {"space": _LOCK_SPACE, "key": flow if flow is not None else "\x01" + event_id})
            verdict = _judge(conn, event_id, flow, seq, body)
            if verdict is not None:
                return verdict
            if apply is not None:
                self.db.run_callback(conn, apply, "apply")
            # UNIQUE keys make a racing duplicate fail loudly, not silently.
            conn.execute("INSERT INTO fairq_receipt (event_id, flow, seq, body, received_ms) "
                         "VALUES (%(event_id)s, %(flow)s, %(seq)s, %(body)s, %(now_ms)s)",
                         {"event_id": event_id, "flow": flow, "seq": seq, "body": body, "now_ms": now_ms})
        return Receipt.ACCEPTED

    def count(self, flow: str | None) -> int:
        if flow is None:
            # Every receipt.
            return self.db.read(lambda conn: int(conn.execute("SELECT count(*) FROM fairq_receipt").fetchone()[0]))
        # One flow's receipts, through the (flow, seq) key.
        return self.db.read(lambda conn: int(conn.execute(
            "SELECT count(*) FROM fairq_receipt WHERE flow = %(flow)s", {"flow": flow}).fetchone()[0]))

    def last_seq(self, flow: str) -> int:
        return self.db.read(lambda conn: _last_seq(conn, flow))

    def close(self) -> None:
        self.db.close()


def _judge(conn: Any, event_id: str, flow: str | None, seq: int, body: str) -> Receipt | None:
    """What a delivery is, before any effect (fairq.kernel.rules.delivery_verdict)."""
    # The receipt under this id, through its primary key.
    found = conn.execute("SELECT flow, seq, body FROM fairq_receipt WHERE event_id = %(event_id)s",
                         {"event_id": event_id}).fetchone()
    last = None if found is not None or flow is None else _last_seq(conn, flow)
    return delivery_verdict(found, flow, seq, body, last)


def _last_seq(conn: Any, flow: str) -> int:
    # The end of the (flow, seq) key for this flow.
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM fairq_receipt WHERE flow = %(flow)s",
                            {"flow": flow}).fetchone()[0])
