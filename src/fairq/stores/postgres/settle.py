"""The SQL of the fenced verbs on PostgreSQL: settle, extend and redrive.

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


def _held(tx: TxnCore, event_ids: list[str], *, lock_flows: bool) -> dict[str, Held]:
    """The rows the fence judges, locked (flows if asked, then heads) and read afresh."""
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
        "e.lease_until_ms, e.owner, h.pass, h.turn, e.reason FROM event AS e "
        "LEFT JOIN head AS h ON h.event_pk = e.id WHERE e.event_id = ANY(%(ids)s::text[])",
        {"ids": ids},
    )
    return {row[0]: Held._make(row) for row in rows}


def check_fence(tx: TxnCore, event_id: str, generation: int, now_ms: int) -> None:
    """Raise StaleLease or LeaseExpired unless this lease may settle now."""
    held_live(_held(tx, [event_id], lock_flows=True).get(event_id), event_id, generation, now_ms)


def settle_many(tx: TxnCore, items: Sequence[SettleItem], *, now_ms: int, max_attempts: int,
                backoff: Backoff) -> list[Settled | LeaseLost]:
    """Settle each lease on its own; a lost lease is reported in its slot."""
    judged = judge_settles(items, _held(tx, [item.event_id for item in items], lock_flows=True),
                           now_ms=now_ms, max_attempts=max_attempts, backoff=backoff)
    judged.count(tx)
    acked, retried, released, quarantined = judged.acked, judged.retried, judged.released, judged.quarantined
    if acked:
        _ack(tx, acked, now_ms)
    if retried or released:
        _ready_again(tx, retried, released, now_ms)
    if quarantined:
        _cas(tx, [r for r, _ in quarantined])
        tx.quarantine([r.id for r, _ in quarantined], [reason for _, reason in quarantined])
    tx.append_audit(judged.audits)
    return judged.out


def _judged(rows: Sequence[Held]) -> dict[str, list[Any]]:
    """The compare-and-set parameters of judged rows: id, generation, lease end."""
    return {"pk": [r.id for r in rows], "gen": [r.generation for r in rows],
            "until": [r.lease_until_ms for r in rows]}


def _expect(wanted: int, changed: int) -> None:
    """The rows are locked, so a compare-and-set fails only if the lock order
    was broken: then nothing of the call is written."""
    if changed != wanted:
        raise StoreError("event", "a settled event changed under its lock; nothing was written")


def _cas(tx: TxnCore, rows: Sequence[Held]) -> None:
    """Check, before quarantining, that each judged event is still inflight
    at the generation and lease end read."""
    _expect(len(rows), int(tx.execute(
        "SELECT count(*) FROM event AS e JOIN unnest(%(pk)s::bigint[], %(gen)s::bigint[], %(until)s::bigint[]) "
        "AS c(pk, gen, until) ON e.id = c.pk AND e.generation = c.gen AND e.lease_until_ms = c.until "
        "AND e.state = 'inflight'", _judged(rows)).fetchone()[0]))


def _ack(tx: TxnCore, rows: list[Held], now_ms: int) -> None:
    pks = [r.id for r in rows]
    # Acked is final (compare-and-set on generation, state and lease end):
    # the event leaves its head row for good.
    _expect(len(rows), tx.execute(
        "UPDATE event AS e SET state = 'acked', lease_until_ms = NULL, settled_ms = %(now_ms)s "
        "FROM unnest(%(pk)s::bigint[], %(gen)s::bigint[], %(until)s::bigint[]) AS c(pk, gen, until) "
        "WHERE e.id = c.pk AND e.generation = c.gen AND e.state = 'inflight' AND e.lease_until_ms = c.until",
        {**_judged(rows), "now_ms": now_ms}).rowcount)
    tx.execute("DELETE FROM head WHERE event_pk = ANY(%(pk)s::bigint[])", {"pk": pks})
    named = [r for r in rows if r.flow_id is not None]
    if not named:
        return
    # The next seq (there are no gaps) becomes the head and inherits the
    # flow's rotation place; no such event: the flow is idle now. The flow
    # is locked, so an enqueue in flight either committed before (its event
    # is found here) or sees no head after.
    runnable = tx.execute(
        "INSERT INTO head (event_pk, flow_id, pass, turn, dispatch_ms, runnable) "
        "SELECT e.id, e.flow_id, c.pass, c.turn, e.next_at_ms, e.next_at_ms <= %(now_ms)s "
        "FROM unnest(%(flow)s::bigint[], %(seq)s::bigint[], %(pass)s::bigint[], %(turn)s::bigint[]) "
        "AS c(flow, seq, pass, turn) JOIN event AS e ON e.flow_id = c.flow AND e.seq = c.seq "
        "RETURNING runnable, dispatch_ms",
        {"flow": [r.flow_id for r in named], "seq": [r.seq + 1 for r in named],
         "pass": [r.pass_ for r in named], "turn": [r.turn for r in named], "now_ms": now_ms},
    ).fetchall()
    tx.wake(sum(1 for r in runnable if r[0]))
    tx.due_later([int(r[1]) for r in runnable], now_ms)


def _ready_again(tx: TxnCore, retried: list[tuple[Held, int, str | None]], released: list[Held],
                 now_ms: int) -> None:
    rows = [r for r, _, _ in retried] + released
    pks = [r.id for r in rows]
    next_at = [at for _, at, _ in retried] + [now_ms] * len(released)
    reasons = [reason for _, _, reason in retried] + [None] * len(released)
    keep = [True] * len(retried) + [False] * len(released)
    # Back to ready (compare-and-set on generation, state and lease end):
    # still the head, claimable again from next_at. A release gives its
    # claim back to the round's budget (lifetime_attempts keeps it).
    _expect(len(rows), tx.execute(
        "UPDATE event AS e SET state = 'ready', lease_until_ms = NULL, next_at_ms = c.at, "
        "reason = CASE WHEN c.keep THEN c.reason ELSE e.reason END, "
        "attempts = CASE WHEN c.keep THEN e.attempts ELSE e.attempts - 1 END "
        "FROM unnest(%(pk)s::bigint[], %(gen)s::bigint[], %(until)s::bigint[], %(at)s::bigint[], "
        "%(reason)s::text[], %(keep)s::boolean[]) AS c(pk, gen, until, at, reason, keep) "
        "WHERE e.id = c.pk AND e.generation = c.gen AND e.state = 'inflight' AND e.lease_until_ms = c.until",
        {**_judged(rows), "at": next_at, "reason": reasons, "keep": keep}).rowcount)
    tx.execute(
        "UPDATE head AS h SET dispatch_ms = c.at, runnable = c.at <= %(now_ms)s "
        "FROM unnest(%(pk)s::bigint[], %(at)s::bigint[]) AS c(pk, at) WHERE h.event_pk = c.pk",
        {"pk": pks, "at": next_at, "now_ms": now_ms},
    )
    tx.wake(sum(1 for at in next_at if at <= now_ms))
    tx.due_later(next_at, now_ms)


def extend(tx: TxnCore, event_id: str, generation: int, *, lease_ms: int, now_ms: int) -> Lease:
    """Move a live lease's end to now + lease_ms (fenced like settle)."""
    row = held_live(_held(tx, [event_id], lock_flows=False).get(event_id), event_id, generation, now_ms)
    until = now_ms + lease_ms
    # Only the current holder's lease moves (compare-and-set on generation,
    # state and lease end); the head's dispatch time follows it.
    got = tx.execute(
        "UPDATE event SET lease_until_ms = %(until)s WHERE id = %(id)s AND generation = %(gen)s "
        "AND state = 'inflight' AND lease_until_ms = %(old)s "
        "RETURNING seq, body, generation, attempts, lifetime_attempts, owner, lease_until_ms, "
        "(SELECT name FROM flow WHERE flow_id = event.flow_id)",
        {"id": row.id, "until": until, "gen": row.generation, "old": row.lease_until_ms},
    ).fetchone()
    if got is None:
        raise StoreError("event", f"event {event_id!r} changed under its lock; nothing was written")
    tx.execute("UPDATE head SET dispatch_ms = %(until)s WHERE event_pk = %(id)s", {"id": row.id, "until": until})
    return Lease(event_id, got[7], int(got[0]), body_value(got[1]), int(got[2]), int(got[3]), int(got[4]),
                 got[5], int(got[6]) / 1000)


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
        tx.execute("UPDATE head SET dispatch_ms = %(now_ms)s, runnable = true WHERE event_pk = %(id)s",
                   {"id": row.id, "now_ms": now_ms})
        tx.wake()

    return redrive_each(tx, items, rows, write, reason=reason, actor=actor, now_ms=now_ms)
