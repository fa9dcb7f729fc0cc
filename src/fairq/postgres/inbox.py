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

from ..types import Receipt
from .connection import PgDatabase
from .schema import ensure_receipts

_LOCK_SPACE = 0x6673


class PgInbox:
    """Receipts in a PostgreSQL schema."""

    def __init__(self, url: str) -> None:
        self.db = PgDatabase(url)
        try:
            ensure_receipts(self.db)
        except BaseException:
            self.db.close()
            raise

    def receive(self, event_id: str, flow: str | None, seq: int, body: str,
                apply: Callable[[Any], Any] | None, now_ms: int) -> Receipt:
        with self.db.write("receive", lambda: None) as conn:
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
        # Every receipt, or one flow's through the (flow, seq) key.
        return self.db.read(lambda conn: int(conn.execute(
            "SELECT count(*) FROM fairq_receipt WHERE %(flow)s::text IS NULL OR flow = %(flow)s::text",
            {"flow": flow}).fetchone()[0]))

    def last_seq(self, flow: str) -> int:
        # The end of the (flow, seq) key for this flow.
        return self.db.read(lambda conn: int(conn.execute(
            "SELECT coalesce(max(seq), 0) FROM fairq_receipt WHERE flow = %(flow)s", {"flow": flow}).fetchone()[0]))

    def close(self) -> None:
        self.db.close()


def _judge(conn: Any, event_id: str, flow: str | None, seq: int, body: str) -> Receipt | None:
    """What a delivery is, before any effect: None means new and next in its flow."""
    found = conn.execute("SELECT flow, seq, body FROM fairq_receipt WHERE event_id = %(event_id)s",
                         {"event_id": event_id}).fetchone()
    if found is not None:
        # The same id must always carry the same flow, seq and body.
        same = found[0] == flow and int(found[1]) == seq and found[2] == body
        return Receipt.DUPLICATE if same else Receipt.ID_CONFLICT
    if flow is None:
        return None
    # Within a flow, positions are taken in order, one event each.
    last = int(conn.execute("SELECT coalesce(max(seq), 0) FROM fairq_receipt WHERE flow = %(flow)s",
                            {"flow": flow}).fetchone()[0])
    if seq <= last:
        return Receipt.SEQUENCE_CONFLICT
    if seq > last + 1:
        return Receipt.GAP
    return None
