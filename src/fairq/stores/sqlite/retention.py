"""The SQL of retention: purge old acked events down to tombstones, and drop
tombstones past the dedup window.

RetentionTxn runs inside a queue write transaction (store.txn.TxnCore)
and records what it removes with that transaction's counts; it never commits.
Maintenance, not the hot path: nothing here is read by a claim or a settle.
"""

from __future__ import annotations

import json

from ...kernel.rules import body_hash
from .txn import TxnCore


class RetentionTxn:
    """The retention statements, bound to an open queue write transaction."""

    def __init__(self, tx: TxnCore) -> None:
        self._tx = tx
        self.connection = tx.connection

    def purge_acked(self, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
        """Replace the acked events settled before acked_before_ms among the
        next `chunk` rows after row id `after_id` by tombstones.

        Returns (events purged, the last row id read; None past the end).
        """
        conn = self.connection
        # Purge pages through the table by rowid: it pays a scan so that no
        # index on the settle time has to be kept up by every ack.
        last = conn.execute(
            "SELECT max(id) FROM (SELECT id FROM event WHERE id > :after ORDER BY id LIMIT :chunk)",
            {"after": after_id, "chunk": chunk},
        ).fetchone()[0]
        if last is None:
            return 0, None
        # Only acked events go, and only old ones: never ready, inflight or quarantined.
        rows = conn.execute(
            "SELECT id, event_id, flow_id, seq, body, settled_ms FROM event "
            "WHERE id > :after AND id <= :last AND state = 'acked' AND settled_ms < :before",
            {"after": after_id, "last": last, "before": acked_before_ms},
        ).fetchall()
        if not rows:
            return 0, last
        # A tombstone keeps what a repeat enqueue is judged by: flow, seq, body hash.
        conn.executemany(
            "INSERT INTO tombstone (event_id, flow_id, seq, body_hash, acked_ms) "
            "VALUES (:event_id, :flow_id, :seq, :body_hash, :acked_ms)",
            [{"event_id": r[1], "flow_id": r[2], "seq": r[3], "body_hash": body_hash(r[4]), "acked_ms": r[5]}
             for r in rows],
        )
        # Acked events are never heads, and a flow's acked events are a
        # prefix of it: deleting them leaves every head and index in place.
        conn.execute(
            "DELETE FROM event WHERE id IN (SELECT value FROM json_each(:ids))",
            {"ids": json.dumps([r[0] for r in rows])},
        )
        self._tx.removed("acked", len(rows))
        self._count_tombstones(len(rows), purged=len(rows))
        return len(rows), last

    def drop_tombstones(self, acked_before_ms: int, *, limit: int) -> int:
        """Forget up to `limit` tombstones of events acked before acked_before_ms."""
        # Past the dedup window an id is forgotten: a new event may take it.
        dropped = self.connection.execute(
            "DELETE FROM tombstone WHERE event_id IN "
            "(SELECT event_id FROM tombstone WHERE acked_ms < :before LIMIT :limit)",
            {"before": acked_before_ms, "limit": limit},
        ).rowcount
        if dropped:
            self._count_tombstones(-dropped, purged=0)
        return dropped

    def _count_tombstones(self, change: int, *, purged: int) -> None:
        # tombstones_n equals the rows in tombstone; purged_total only grows.
        self.connection.execute(
            "UPDATE retention SET tombstones_n = tombstones_n + :change, "
            "purged_total = purged_total + :purged WHERE id = 1",
            {"change": change, "purged": purged},
        )
