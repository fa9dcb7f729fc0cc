"""The SQL of the fenced verbs: settle, extend and redrive.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
Each verb reads the rows it judges in one statement (by the event_id index,
under the write lock), has them judged as every store judges them
(fairq.kernel.rows: the fence verdict of fairq.kernel.rules.fence, the settle decision of
fairq.kernel.policy.decide) and writes the answers with one statement per kind of
change, whatever the batch size.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..backend import SettleItem
from ...errors import LeaseLost, RedriveRefused
from ...kernel.policy import Backoff, from_ms
from ...types import Lease, Settled
from ..._json import body_value
from ...kernel.rows import Held, Judged, held_live, judge_settles, redrive_each
from . import heads
from .tenant_rows import Counts
from .txn import TxnCore

# The columns a settle, extend, redrive or discard needs to judge a lease (a
# Held, with the event's own budget and backoff), then the event's tenant,
# whether its flow is paused and the seq its flow's next event gets (by the
# flow's key; an event of a flow of its own has no flow row).
_FENCE_COLUMNS = (
    "SELECT e.event_id, e.id, e.flow_id, e.seq, e.state, e.generation, e.attempts, e.lifetime_attempts, "
    "e.lease_until_ms, e.owner, e.pass, e.turn, e.reason, e.max_attempts, e.backoff, "
    "e.tenant_id, f.paused, f.next_seq "
    "FROM event AS e LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
)
_FENCE_ONE = _FENCE_COLUMNS + "WHERE e.event_id = :id"
_FENCE_MANY = _FENCE_COLUMNS + "WHERE e.event_id IN (SELECT value FROM json_each(:ids))"


def held_rows(tx: TxnCore, event_ids: list[str], tenants: dict[int, int] | None = None,
              paused: set[int] | None = None, last: set[int] | None = None) -> dict[str, Held]:
    """The rows the fence judges, by event id; `tenants`, if given, gets the
    tenant of each row (by row id) that has one, `paused` the ids of the
    rows whose flow is paused, `last` those of the rows last in their flow."""
    # By the event_id index, read under the write lock; one id by value,
    # without a JSON list.
    if len(event_ids) == 1:
        row = tx.cursor.execute(_FENCE_ONE, {"id": event_ids[0]}).fetchone()
        rows = [] if row is None else [row]
    else:
        rows = tx.connection.execute(_FENCE_MANY, {"ids": json.dumps(event_ids)}).fetchall()
    if tenants is not None:
        tenants.update((row[1], row[15]) for row in rows if row[15] is not None)
    if paused is not None:
        paused.update(row[1] for row in rows if row[16])
    if last is not None:
        last.update(row[1] for row in rows if row[17] is not None and row[3] + 1 == row[17])
    return {row[0]: Held._make(row[:15]) for row in rows}


def check_fence(tx: TxnCore, event_id: str, generation: int, now_ms: int) -> None:
    """Raise StaleLease or LeaseExpired unless this lease may settle now."""
    held_live(held_rows(tx, [event_id]).get(event_id), event_id, generation, now_ms)


def settle_many(
    tx: TxnCore, items: Sequence[SettleItem], *, now_ms: int, max_attempts: int, backoff: Backoff
) -> list[Settled | LeaseLost]:
    """Settle each lease on its own; a lost lease is reported in its slot."""
    tenants: dict[int, int] = {}  # the tenant of each row that has one
    paused: set[int] = set()  # the rows whose flow is paused
    last: set[int] = set()  # the rows last in their flow: no event behind them
    judged = judge_settles(items, held_rows(tx, [item.event_id for item in items], tenants, paused, last),
                           now_ms=now_ms, max_attempts=max_attempts, backoff=backoff)
    judged.count(tx)
    conn = tx.connection
    # The ack statements, the hot path of every cycle, take positional
    # parameters in the order written.
    if judged.acked:
        # Acked is final: the event leaves the dispatch indexes for good.
        tx.cursor.executemany(
            "UPDATE event SET state = 'acked', lease_until_ms = NULL, settled_ms = ?, "
            "pass = NULL, turn = NULL, dispatch_ms = NULL, runnable = 0 WHERE id = ?",
            [(now_ms, row.id) for row in judged.acked],  # (settled_ms, id)
        )
        # (pass, turn, now_ms, flow_id, seq) of each acked head's successor
        next_heads = [(row.pass_, row.turn, now_ms, row.flow_id, row.seq + 1)
                      for row in judged.acked if row.flow_id is not None and row.id not in tenants
                      and row.id not in paused]
        if next_heads:
            # The next seq, if it is ready (every event behind a head is
            # stored), becomes the head and inherits the flow's rotation
            # place; no row: the flow is idle now, or that event was
            # discarded, which the next statement steps over.
            found = conn.executemany(
                "UPDATE event SET pass = ?, turn = ?, dispatch_ms = next_at_ms, "
                "runnable = next_at_ms <= ? WHERE flow_id = ? AND seq = ? AND state = 'ready'",
                next_heads,
            ).rowcount
            if found < sum(1 for row in judged.acked if row.flow_id is not None and row.id not in tenants
                           and row.id not in paused and row.id not in last):
                # Past the discarded ones (a head made above is found again, and left as it is).
                conn.executemany(heads.NEXT_HEAD, [
                    {"pass": p, "turn": t, "paused": 0, "now_ms": n, "flow_id": f, "seq": s - 1}
                    for p, t, n, f, s in next_heads])
        stopped = [{"pass": row.pass_, "turn": row.turn, "paused": 1, "now_ms": now_ms, "flow_id": row.flow_id,
                    "seq": row.seq} for row in judged.acked if row.id in paused and row.id not in tenants]
        if stopped:
            # A paused flow's next head takes its place but stays out of the dispatch indexes.
            conn.executemany(heads.NEXT_HEAD, stopped)
    if judged.retried:
        # Back to ready: still the head, claimable again from next_at (in a
        # paused flow: out of the dispatch indexes until resumed).
        conn.executemany(
            "UPDATE event SET state = 'ready', lease_until_ms = NULL, next_at_ms = :next_at_ms, "
            "dispatch_ms = CASE WHEN :paused THEN NULL ELSE :next_at_ms END, runnable = :runnable, "
            "reason = :reason WHERE id = :id",
            [{"id": row.id, "next_at_ms": next_at, "paused": int(row.id in paused),
              "runnable": int(next_at <= now_ms and row.id not in paused), "reason": reason}
             for row, next_at, reason in judged.retried],
        )
    if judged.released:
        # Given back unused: ready at once (in a paused flow: once resumed),
        # and the claim is not counted against the round's budget
        # (lifetime_attempts keeps it).
        conn.executemany(
            "UPDATE event SET state = 'ready', lease_until_ms = NULL, next_at_ms = :now_ms, "
            "dispatch_ms = CASE WHEN :paused THEN NULL ELSE :now_ms END, runnable = NOT :paused, "
            "attempts = attempts - 1 WHERE id = :id",
            [{"id": row.id, "now_ms": now_ms, "paused": int(row.id in paused)} for row in judged.released],
        )
    if judged.quarantined:
        tx.quarantine([row.id for row, _ in judged.quarantined], [reason for _, reason in judged.quarantined])
    if judged.audits:
        tx.append_audit(judged.audits)
    if tenants:
        _count_tenants(tx, judged, tenants, paused, now_ms)
    return judged.out


def _count_tenants(tx: TxnCore, judged: Judged, tenants: dict[int, int], paused: set[int], now_ms: int) -> None:
    """What a settle batch did to its tenants: each event that left inflight
    ends its tenant's hold; each head it made runnable and each event it
    made ready is counted (a successor of an acked head of a tenant's flow
    becomes its head here)."""
    counts = Counts()
    for row in judged.acked:
        tenant = tenants.get(row.id)
        counts.lease_ended(tenant)
        if tenant is not None and row.flow_id is not None:
            # As for a successor above, one at a time: whether it is runnable comes back.
            found = tx.connection.execute(heads.NEXT_HEAD + " RETURNING runnable", {
                "pass": row.pass_, "turn": row.turn, "paused": int(row.id in paused), "now_ms": now_ms,
                "flow_id": row.flow_id, "seq": row.seq}).fetchone()
            counts.add(tenant, 0 if found is None else found[0])
    for row, next_at, _ in judged.retried:
        counts.lease_ended(tenants.get(row.id))
        counts.add(tenants.get(row.id), int(next_at <= now_ms and row.id not in paused), ready=1)
    for row in judged.released:
        counts.lease_ended(tenants.get(row.id))
        counts.add(tenants.get(row.id), int(row.id not in paused), ready=1)
    for row, _ in judged.quarantined:
        counts.lease_ended(tenants.get(row.id))
    counts.write(tx)


def extend(tx: TxnCore, event_id: str, generation: int, *, lease_ms: int, now_ms: int) -> Lease:
    """Move a live lease's end to now + lease_ms (fenced like settle)."""
    row = held_live(held_rows(tx, [event_id]).get(event_id), event_id, generation, now_ms)
    # Only the current holder's lease moves; the head's dispatch time follows
    # it (a paused flow's head has none).
    got = tx.connection.execute(
        "UPDATE event SET lease_until_ms = :lease_until_ms, "
        "dispatch_ms = CASE WHEN dispatch_ms IS NULL THEN NULL ELSE :lease_until_ms END "
        "WHERE id = :id RETURNING seq, body, generation, attempts, lifetime_attempts, owner, "
        "lease_until_ms, kind, timeout_ms",
        {"id": row.id, "lease_until_ms": now_ms + lease_ms},
    ).fetchone()
    return Lease(event_id, _flow_name(tx, row.flow_id), got[0], body_value(got[1]), got[2], got[3],
                 got[4], got[5], got[6] / 1000, got[7], from_ms(got[8]))


def _flow_name(tx: TxnCore, flow_id: int | None) -> str | None:
    if flow_id is None:
        return None
    # A flow's name never changes.
    name: str = tx.connection.execute(
        "SELECT name FROM flow WHERE flow_id = :flow_id", {"flow_id": flow_id}
    ).fetchone()[0]
    return name


def redrive_many(tx: TxnCore, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                 now_ms: int) -> list[int | RedriveRefused]:
    """Give each quarantined head (event_id, expected_generation) a new round:
    its new generation, or its refusal, in its slot (read under the file's
    write lock, so nothing changes between the judgement and the write)."""
    tenants: dict[int, int] = {}
    paused: set[int] = set()
    rows = held_rows(tx, sorted({event_id for event_id, _ in items}), tenants, paused)
    counts = Counts()

    def write(row: Held, generation: int) -> None:
        # A new round: attempts reset, lifetime_attempts kept, the old reason
        # moves to the audit row. The generation moves on, so no holder from
        # before the quarantine can settle. Still the head, in its old
        # rotation place, claimable now (in a paused flow: once resumed).
        stopped = int(row.id in paused)
        tx.connection.execute(
            "UPDATE event SET state = 'ready', generation = :generation, attempts = 0, "
            "next_at_ms = :now_ms, dispatch_ms = CASE WHEN :paused THEN NULL ELSE :now_ms END, "
            "runnable = NOT :paused, reason = NULL WHERE id = :id AND state = 'quarantined'",
            {"id": row.id, "generation": generation, "now_ms": now_ms, "paused": stopped},
        )
        # its tenant: one more runnable head (unless paused), one more ready event
        counts.add(tenants.get(row.id), 1 - stopped, ready=1)

    results = redrive_each(tx, items, rows, write, reason=reason, actor=actor, now_ms=now_ms)
    counts.write(tx)
    return results
