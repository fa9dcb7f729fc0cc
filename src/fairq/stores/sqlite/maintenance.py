"""The SQL of maintenance: purge old acked and discarded events down to tombstones, drop
tombstones past the dedup window, reset the stored clock.

Runs inside a queue write transaction (txn.TxnCore) and records what it
removes with that transaction's counts; never commits. Not the hot path:
nothing here is read by a claim or a settle (a clock reset scans the event
table).
"""

from __future__ import annotations

import json
from typing import Any

from ...kernel import clock
from ...kernel.rules import body_hash
from ...types import ClockReset
from . import heads
from .txn import TxnCore


def purge_acked(tx: TxnCore, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
    """Tombstone the acked events settled before acked_before_ms among the
    next `chunk` rows after row id `after_id`: (purged, last row id read or None)."""
    conn = tx.connection
    # Purge pages through the table by rowid: it pays a scan so that no
    # index on the settle time has to be kept up by every ack.
    last = conn.execute(
        "SELECT max(id) FROM (SELECT id FROM event WHERE id > :after ORDER BY id LIMIT :chunk)",
        {"after": after_id, "chunk": chunk},
    ).fetchone()[0]
    if last is None:
        return 0, None
    # Only acked and discarded events go, and only old ones: never ready,
    # inflight or quarantined.
    rows = conn.execute(
        "SELECT id, event_id, flow_id, seq, body, settled_ms, state FROM event "
        "WHERE id > :after AND id <= :last AND (state = 'acked' OR state = 'discarded') "
        "AND settled_ms < :before",
        {"after": after_id, "last": last, "before": acked_before_ms},
    ).fetchall()
    rows = _before_heads(tx, rows)
    if not rows:
        return 0, last
    # A tombstone keeps what a repeat enqueue is judged by: flow, seq, body hash.
    conn.executemany(
        "INSERT INTO tombstone (event_id, flow_id, seq, body_hash, acked_ms) "
        "VALUES (:event_id, :flow_id, :seq, :body_hash, :acked_ms)",
        [{"event_id": r[1], "flow_id": r[2], "seq": r[3], "body_hash": body_hash(r[4]), "acked_ms": r[5]}
         for r in rows],
    )
    # Acked and discarded events are never heads, and those removed lie
    # before their flow's head: deleting them leaves every head, every
    # event behind a head and every index in place.
    ids = json.dumps([r[0] for r in rows])
    conn.execute("DELETE FROM event WHERE id IN (SELECT value FROM json_each(:ids))", {"ids": ids})
    # A result goes with its event, in the same transaction (a row id may be used again).
    conn.execute("DELETE FROM event_result WHERE event_pk IN (SELECT value FROM json_each(:ids))", {"ids": ids})
    discarded = sum(1 for r in rows if r[6] == "discarded")
    tx.removed("acked", len(rows) - discarded)
    if discarded:
        tx.removed("discarded", discarded)
    _count_tombstones(tx, len(rows), purged=len(rows))
    return len(rows), last


def _before_heads(tx: TxnCore, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows (id, event_id, flow_id, seq, body, settled_ms, state) purge
    may take: a discarded event behind its flow's head stays until the head
    has passed it (the flow steps over it then)."""
    flows = {r[2] for r in rows if r[6] == "discarded" and r[2] is not None}
    if not flows:
        return rows
    head = {}
    for flow_id in sorted(flows):
        # By the flow's key, then its (flow_id, seq) index.
        next_seq = tx.connection.execute("SELECT next_seq FROM flow WHERE flow_id = :flow_id",
                                         {"flow_id": flow_id}).fetchone()[0]
        head[flow_id] = heads.head_seq(tx.connection, flow_id, next_seq)
    return [r for r in rows if r[6] == "acked" or r[2] is None or r[3] < head[r[2]]]


def drop_tombstones(tx: TxnCore, acked_before_ms: int, *, limit: int) -> int:
    """Forget up to `limit` tombstones of events acked before acked_before_ms."""
    # Past the dedup window an id is forgotten: a new event may take it.
    dropped = tx.connection.execute(
        "DELETE FROM tombstone WHERE event_id IN "
        "(SELECT event_id FROM tombstone WHERE acked_ms < :before LIMIT :limit)",
        {"before": acked_before_ms, "limit": limit},
    ).rowcount
    if dropped:
        _count_tombstones(tx, -dropped, purged=0)
    return dropped


def _count_tombstones(tx: TxnCore, change: int, *, purged: int) -> None:
    # tombstones_n equals the rows in tombstone; purged_total only grows.
    tx.connection.execute(
        "UPDATE retention SET tombstones_n = tombstones_n + :change, "
        "purged_total = purged_total + :purged WHERE id = 1",
        {"change": change, "purged": purged},
    )


def reset_clock(tx: TxnCore, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
    """Move the stored clock back to to_ms, and with it every time that lies
    beyond to_ms (fairq.kernel.clock.reset_clock says when and why)."""

    def move(to_ms: int, back: int) -> tuple[int, int]:
        params = {"to_ms": to_ms, "back": back}
        conn = tx.connection
        # A lease beyond the new clock ends as much earlier as the clock moves
        # back, never before it; an inflight head's dispatch time is its lease
        # end (a paused flow's head has none). Generations are untouched: a
        # holder whose lease now ends earlier is still fenced by its
        # generation once the event is claimed again.
        leases = conn.execute(
            "UPDATE event SET lease_until_ms = max(:to_ms, lease_until_ms - :back), "
            "dispatch_ms = CASE WHEN dispatch_ms IS NULL THEN NULL ELSE max(:to_ms, lease_until_ms - :back) END "
            "WHERE state = 'inflight' AND lease_until_ms > :to_ms",
            params,
        ).rowcount
        # Ready times (delay, backoff) beyond the new clock move back the same
        # way; a head's dispatch time follows (events behind a head have none),
        # and so does the due time of an event never claimed, which claim lag
        # counts from. A runnable head was due by the old clock, so it ends up
        # at the new clock at the latest: still due, still runnable. An event
        # never claimed and enqueued before the new clock was given its ready
        # time by a true clock (a long delay): it keeps it.
        waits = conn.execute(
            "UPDATE event SET next_at_ms = max(:to_ms, next_at_ms - :back), "
            "dispatch_ms = CASE WHEN dispatch_ms IS NULL THEN NULL ELSE max(:to_ms, next_at_ms - :back) END, "
            "due_ms = CASE WHEN first_claim_ms IS NULL AND due_ms > :to_ms "
            "THEN max(:to_ms, due_ms - :back) ELSE due_ms END "
            "WHERE state = 'ready' AND next_at_ms > :to_ms "
            "AND (first_claim_ms IS NOT NULL OR created_ms > :to_ms)",
            params,
        ).rowcount
        # A tenant's hold ends (the next claim judges it again), and its token
        # bucket's time moves back as leases do, so no refill is lost.
        conn.execute(
            "UPDATE tenant SET held_until_ms = 0, at_ms = CASE WHEN at_ms > :to_ms "
            "THEN max(:to_ms, at_ms - :back) ELSE at_ms END WHERE held_until_ms > 0 OR at_ms > :to_ms",
            params,
        )
        return leases, waits

    return clock.reset_clock(tx, to_ms, move, reason=reason, actor=actor)
