"""The SQL of maintenance on PostgreSQL: purge old acked events down to
tombstones, drop tombstones past the dedup window, reset a model clock (the
same file, and the same functions, as the SQLite store's).

Runs inside a queue write transaction (TxnCore) and records what it removes
with that transaction's counters; never commits. Not the hot path: nothing
here is read by a claim or a settle.
"""

from __future__ import annotations

from ...errors import UsageError
from ...kernel import clock
from ...kernel.rules import body_hash
from ...types import ClockReset
from .txn import TxnCore


def purge_acked(tx: TxnCore, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
    """Tombstone the acked events settled before acked_before_ms among the
    next `chunk` rows after row id `after_id`: (purged, last row id read or None)."""
    # Purge pages through the table by its primary key.
    last = tx.execute("SELECT max(id) FROM (SELECT id FROM event WHERE id > %(after)s ORDER BY id "
                      "LIMIT %(chunk)s) AS page", {"after": after_id, "chunk": chunk}).fetchone()[0]
    if last is None:
        return 0, None
    # Only final events go (acked, or discarded: settled_ms is when), and
    # only old ones: never ready, inflight or quarantined. A discarded event
    # behind its flow's head waits until the head has passed it, so a flow's
    # stored events stay one run of seqs (what purge removes is a prefix).
    rows = tx.execute(
        "SELECT e.id, e.event_id, e.flow_id, e.seq, e.body, e.settled_ms, e.state FROM event AS e "
        "WHERE e.id > %(after)s AND e.id <= %(last)s AND e.state IN ('acked', 'discarded') "
        "AND e.settled_ms < %(before)s AND (e.state = 'acked' OR e.flow_id IS NULL OR NOT EXISTS "
        "(SELECT FROM head AS h JOIN event AS x ON x.id = h.event_pk WHERE h.flow_id = e.flow_id AND x.seq < e.seq))",
        {"after": after_id, "last": last, "before": acked_before_ms},
    ).fetchall()
    if not rows:
        return 0, int(last)
    # A tombstone keeps what a repeat enqueue is judged by: flow, seq, body hash.
    tx.execute(
        "INSERT INTO tombstone (event_id, flow_id, seq, body_hash, acked_ms) "
        "SELECT * FROM unnest(%(event_id)s::text[], %(flow_id)s::bigint[], %(seq)s::bigint[], "
        "%(hash)s::bytea[], %(acked)s::bigint[])",
        {"event_id": [r[1] for r in rows], "flow_id": [r[2] for r in rows], "seq": [r[3] for r in rows],
         "hash": [body_hash(r[4]) for r in rows], "acked": [r[5] for r in rows]},
    )
    # Final events are never heads, and those purged are a prefix of their flow.
    tx.execute("DELETE FROM event WHERE id = ANY(%(ids)s::bigint[])", {"ids": [r[0] for r in rows]})
    # A result goes with its event, in the same transaction.
    tx.execute("DELETE FROM event_result WHERE event_pk = ANY(%(ids)s::bigint[])", {"ids": [r[0] for r in rows]})
    tx.removed("acked", sum(r[6] == "acked" for r in rows))
    tx.removed("discarded", sum(r[6] == "discarded" for r in rows))
    tx.count("tombstones", len(rows))
    tx.count("purged", len(rows))
    return len(rows), int(last)


def drop_tombstones(tx: TxnCore, acked_before_ms: int, *, limit: int) -> int:
    """Forget up to `limit` tombstones of events acked before acked_before_ms."""
    # Past the dedup window an id is forgotten: a new event may take it.
    dropped = int(tx.execute(
        "DELETE FROM tombstone WHERE event_id IN (SELECT event_id FROM tombstone WHERE acked_ms < %(before)s "
        "ORDER BY acked_ms LIMIT %(limit)s)", {"before": acked_before_ms, "limit": limit}).rowcount)
    tx.count("tombstones", -dropped)
    return dropped


def reset_clock(tx: TxnCore, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
    """Move the stored (model) clock back to to_ms, with every lease end and
    ready time beyond it (fairq.kernel.clock.reset_clock says when and why)."""
    if tx.server_clock:
        raise UsageError("reset_clock is for a queue opened with clock='model'; on the server clock "
                         "the database server keeps the time")

    def move(to_ms: int, back: int) -> tuple[int, int]:
        params = {"to_ms": to_ms, "back": back}
        # A lease beyond the new clock ends as much earlier as the clock moves back,
        # never before it; an inflight head's dispatch time is its lease end.
        leases = tx.execute(
            "WITH moved AS (UPDATE event SET lease_until_ms = greatest(%(to_ms)s, lease_until_ms - %(back)s) "
            "WHERE state = 'inflight' AND lease_until_ms > %(to_ms)s RETURNING id, lease_until_ms) "
            "UPDATE head AS h SET dispatch_ms = m.lease_until_ms FROM moved AS m WHERE h.event_pk = m.id "
            "RETURNING h.event_pk", params).rowcount
        # Ready times beyond the new clock move back the same way, and so does the
        # due time of an event never claimed; a head's dispatch time follows.
        waits = tx.execute(
            "WITH moved AS (UPDATE event SET next_at_ms = greatest(%(to_ms)s, next_at_ms - %(back)s), "
            "due_ms = CASE WHEN first_claim_ms IS NULL AND due_ms > %(to_ms)s "
            "THEN greatest(%(to_ms)s, due_ms - %(back)s) ELSE due_ms END "
            "WHERE state = 'ready' AND next_at_ms > %(to_ms)s "
            "AND (first_claim_ms IS NOT NULL OR created_ms > %(to_ms)s) RETURNING id, next_at_ms), "
            "heads AS (UPDATE head AS h SET dispatch_ms = m.next_at_ms FROM moved AS m WHERE h.event_pk = m.id) "
            "SELECT count(*) FROM moved", params).fetchone()[0]
        return int(leases), int(waits)

    return clock.reset_clock(tx, to_ms, move, reason=reason, actor=actor)
