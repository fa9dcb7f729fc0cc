"""The SQL of the fenced verbs on PostgreSQL run from Python: the fence check
of a settle with an effect, extend and redrive (a settle itself is
migrations/verbs.sql's fairq_settle, called inside the transaction: verbs.py).

Runs inside a queue write transaction (TxnCore); never commits. Each verb
locks what it judges in the one order used everywhere (flow, then head, then
event), then reads the rows afresh and has them judged as every store
judges them (fairq.kernel.rows: the fence verdict of fairq.kernel.rules.fence, the settle
decision of fairq.kernel.policy.decide). Every
write is a compare-and-set on what was judged (generation, state, lease
end), so a row another transaction changed is never settled on stale facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._json import body_value
from ..backend import SettleItem
from ...errors import LeaseLost, RedriveRefused, StoreError
from ...kernel.policy import Backoff
from ...kernel.rows import Held, held_live, judge_settles, redrive_each
from ...types import Lease, Settled
from .txn import TxnCore


def _held(tx: TxnCore, event_ids: list[str], *, lock_flows: bool,
          seen_expired: set[str] | None = None) -> dict[str, Held]:
    """The rows the fence judges, locked (flows if asked, then heads) and read
    afresh; `seen_expired`, if given, gets the ids of inflight events whose
    head a claim has put back in the rotation (it saw their lease end)."""
    ids = sorted(set(event_ids))
    # An event's flow and row id never change: the locks can find them by id.
    if lock_flows:
        # The flow serialises "ack of its last event" against "enqueue finds no head".
        tx.execute("SELECT flow_id FROM flow WHERE flow_id IN (SELECT flow_id FROM event "
                   "WHERE event_id = ANY(%(ids)s::text[])) ORDER BY flow_id FOR NO KEY UPDATE", {"ids": ids})
    # The heads judged, locked in event order: a claim skips them, a settle waits.
    tx.execute("SELECT event_pk FROM head WHERE event_pk IN (SELECT id FROM event "
               "WHERE event_id = ANY(%(ids)s::text[])) ORDER BY event_pk FOR UPDATE", {"ids": ids})
    rows = tx.execute(
        "SELECT e.event_id, e.id, e.flow_id, e.seq, e.state, e.generation, e.attempts, e.lifetime_attempts, "
        "e.lease_until_ms, e.owner, h.pass, h.turn, e.reason, e.max_attempts, e.backoff, "
        "h.runnable AND e.state = 'inflight' "
        "FROM event AS e LEFT JOIN head AS h ON h.event_pk = e.id WHERE e.event_id = ANY(%(ids)s::text[])",
        {"ids": ids},
    ).fetchall()
    if seen_expired is not None:
        seen_expired.update(row[0] for row in rows if row[15])
    return {row[0]: Held._make(row[:15]) for row in rows}


def _live(tx: TxnCore, event_id: str, generation: int, now_ms: int, *, lock_flows: bool) -> tuple[Held, int]:
    """The row of a lease that may settle or extend, and the time it is
    judged at: no earlier than its lease end once a claim has seen that end
    (this transaction's time was fixed when it began, maybe before that
    claim read the clock), as fairq_settle judges it."""
    seen_expired: set[str] = set()
    row = _held(tx, [event_id], lock_flows=lock_flows, seen_expired=seen_expired).get(event_id)
    if row is not None and event_id in seen_expired and row.lease_until_ms is not None:
        now_ms = max(now_ms, row.lease_until_ms)
    return held_live(row, event_id, generation, now_ms), now_ms


def check_fence(tx: TxnCore, event_id: str, generation: int, now_ms: int) -> None:
    """Raise StaleLease or LeaseExpired unless this lease may settle now."""
    _live(tx, event_id, generation, now_ms, lock_flows=True)


def extend(tx: TxnCore, event_id: str, generation: int, *, lease_ms: int, now_ms: int) -> Lease:
    """Move a live lease's end to now + lease_ms (fenced like settle)."""
    row, now_ms = _live(tx, event_id, generation, now_ms, lock_flows=False)
    until = now_ms + lease_ms
    # Only the current holder's lease moves (compare-and-set on generation,
    # state and lease end); the head's dispatch time follows it.
    got = tx.execute(
        "UPDATE event SET lease_until_ms = %(until)s WHERE id = %(id)s AND generation = %(gen)s "
        "AND state = 'inflight' AND lease_until_ms = %(old)s "
        "RETURNING seq, body, generation, attempts, lifetime_attempts, owner, lease_until_ms, "
        "(SELECT name FROM flow WHERE flow_id = event.flow_id), kind, timeout_ms",
        {"id": row.id, "until": until, "gen": row.generation, "old": row.lease_until_ms},
    ).fetchone()
    if got is None:
        raise StoreError("event", f"event {event_id!r} changed under its lock; nothing was written")
    tx.execute("UPDATE head SET dispatch_ms = %(until)s WHERE event_pk = %(id)s", {"id": row.id, "until": until})
    return Lease(event_id, got[7], int(got[0]), body_value(got[1]), int(got[2]), int(got[3]), int(got[4]),
                 got[5], int(got[6]) / 1000, got[8], None if got[9] is None else int(got[9]) / 1000)


def redrive_many(tx: TxnCore, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                 now_ms: int) -> list[int | RedriveRefused]:
    """Give each quarantined head (event_id, expected_generation) a new round:
    its new generation, or its refusal, in its slot. Every head named is
    locked first, in one statement and in event order (as settle locks
    them), so two calls naming the same events in any order never deadlock."""
    rows = _held(tx, [event_id for event_id, _ in items], lock_flows=False)

    def write(row: Held, generation: int) -> None:
        # A new round (compare-and-set on state and generation): attempts
        # reset, the old reason moves to the audit row; still the head, in
        # its old rotation place, claimable now.
        changed = tx.execute(
            "UPDATE event SET state = 'ready', generation = %(gen)s, attempts = 0, next_at_ms = %(now_ms)s, "
            "reason = NULL WHERE id = %(id)s AND state = 'quarantined' AND generation = %(old)s",
            {"id": row.id, "gen": generation, "old": row.generation, "now_ms": now_ms},
        ).rowcount
        if changed != 1:
            raise RedriveRefused(row.event_id, f"event {row.event_id!r} changed while it was redriven; look again")
        # (A tenanted head waits for the next claim to make it runnable and
        # count it on its tenant: see fairq_claim; a paused flow's stays out
        # of the rotation until it is resumed.)
        paused = tx.execute("UPDATE head SET dispatch_ms = %(now_ms)s, runnable = tenant_id IS NULL AND NOT paused "
                            "WHERE event_pk = %(id)s RETURNING paused", {"id": row.id, "now_ms": now_ms}).fetchone()
        if not (paused and paused[0]):
            tx.wake()

    return redrive_each(tx, items, rows, write, reason=reason, actor=actor, now_ms=now_ms)
