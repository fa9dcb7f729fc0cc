"""The SQL of claim: lease the next heads in rotation order.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
One statement promotes the heads whose time has come (only when the
waiting index's earliest entry, read with the state row, says one has);
per page of heads, one reads a page of the rotation index and one writes
the claims (a claim of one head that promoted nothing takes the first head
the state row was read with, and reads no page). The rotation step
(fairq.kernel.rules.rotate) and what an expired lease becomes
(fairq.kernel.rules.expired_lease_fate) are the rules' to say.
"""

from __future__ import annotations

from typing import Any

from ...kernel import rules
from ...kernel.policy import from_ms
from ...types import Lease, UndecodableBody
from ..._json import body_value
from .txn import TxnCore


def claim_many(tx: TxnCore, n: int, *, owner: str | None, now_ms: int, lease_ms: int,
               max_attempts: int) -> list[Lease]:
    """Claim up to n heads, one per flow, lowest rotation position first."""
    conn = tx.connection
    promoted = 0
    if tx.heads_may_be_due(now_ms):
        # Heads whose time has come (delay or backoff over, lease expired)
        # enter the rotation index; heads still waiting cost nothing here.
        promoted = conn.execute(
            "UPDATE event SET runnable = 1 WHERE runnable = 0 AND dispatch_ms <= :now_ms",
            {"now_ms": now_ms},
        ).rowcount
    row = tx.state_row()
    leases: list[Lease] = []
    lease_until = now_ms + lease_ms
    lease_until_s = lease_until / 1000
    from_ready = 0  # claims of ready heads; the others reclaim an expired lease
    exhausted = False
    # The first head read with the state row is still the first if nothing
    # was promoted since: a claim of one needs no page of its own.
    first = tx.first_head()
    while len(leases) < n and not exhausted:
        limit = n - len(leases)
        if first is not None and limit == 1 and not promoted:
            rows = first
        else:
            # Only heads in the rotation index are read, in rotation order.
            rows = conn.execute(
                "SELECT e.id, e.event_id, f.name, f.weight, e.seq, e.body, e.pass, e.state, "
                "e.generation, e.attempts, e.lifetime_attempts, e.lease_until_ms, e.owner, "
                "e.due_ms, e.first_claim_ms "
                "FROM event AS e INDEXED BY event_rotation LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
                "WHERE e.runnable = 1 ORDER BY e.pass, e.turn LIMIT :limit",
                {"limit": limit},
            ).fetchall()
        first = None
        exhausted = len(rows) < limit  # a short page: nothing else is runnable
        claimed: list[tuple[Any, ...]] = []  # the UPDATE's parameters, in its order
        for (rowid, event_id, name, weight, seq, body, pass_, state, generation,
             attempts, lifetime, old_lease_until, old_owner, due_ms, first_claim_ms) in rows:
            if state != "ready":
                tx.happened("expired")
            value = body_value(body)
            if isinstance(value, UndecodableBody):
                _quarantine_undecodable(tx, rowid, event_id, state, generation, value, now_ms)
                continue
            if state == "ready":
                from_ready += 1
            else:
                spent = rules.expired_lease_fate(attempts, max_attempts)
                if spent is not None:
                    _quarantine_spent_lease(tx, spent, rowid, event_id, generation, attempts, lifetime,
                                            old_lease_until, old_owner, now_ms)
                    continue
                tx.record(event_id, "expired", "lease expired before the holder settled",
                          old_owner, generation, now_ms,
                          {"lease_until": from_ms(old_lease_until), "attempts": attempts})
            if first_claim_ms is None:
                tx.claim_lag(now_ms - due_ms)
            # The turn is taken now, at claim time, not when the work succeeds.
            step = rules.rotate(pass_, weight or 1, vtime=row.vtime, tail=row.tail)
            row.vtime, row.tail = step.vtime, step.tail
            claimed.append((lease_until, owner, now_ms, step.pass_, tx.next_turn(), lease_until, rowid))
            leases.append(Lease(event_id, name, seq, value, generation + 1,
                                attempts + 1, lifetime + 1, owner, lease_until_s))
        # The claimed head becomes inflight with a new generation, its
        # attempt counted durably before any work starts, and waits in the
        # waiting index until its lease ends or it is settled. (Positional
        # parameters, in the order written: the claim's hot statement.)
        tx.cursor.executemany(
            "UPDATE event SET state = 'inflight', generation = generation + 1, "
            "attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1, "
            "next_at_ms = NULL, lease_until_ms = ?, owner = ?, "
            "first_claim_ms = coalesce(first_claim_ms, ?), pass = ?, turn = ?, "
            "dispatch_ms = ?, runnable = 0 WHERE id = ?",
            claimed,
        )
    tx.moved("ready", "inflight", from_ready)
    tx.happened("claimed", len(leases))
    if not promoted:
        tx.leave_time_unstored()
    return leases


def _quarantine_spent_lease(
    tx: TxnCore, spent: rules.Quarantine, rowid: int, event_id: str, generation: int, attempts: int,
    lifetime: int, lease_until_ms: int, old_owner: str | None, now_ms: int,
) -> None:
    """An expired head whose round budget is spent stops, and blocks its flow."""
    tx.quarantine([{"id": rowid, "reason": spent.reason}])
    tx.moved("inflight", "quarantined")
    tx.happened("quarantined")
    tx.record(event_id, "quarantine", spent.reason, old_owner, generation, now_ms,
              {"cause": spent.cause, "attempts": attempts,
               "lifetime_attempts": lifetime, "lease_until": from_ms(lease_until_ms)})


def _quarantine_undecodable(tx: TxnCore, rowid: int, event_id: str, state: str, generation: int,
                            body: UndecodableBody, now_ms: int) -> None:
    """A head whose stored body cannot be decoded here stops, instead of
    stalling every claim that reaches it; a redrive gives it a new round."""
    tx.quarantine([{"id": rowid, "reason": f"undecodable_body: {body.problem}"}])
    tx.moved(state, "quarantined")
    tx.happened("quarantined")
    tx.record(event_id, "quarantine", "undecodable_body", None, generation, now_ms,
              {"cause": "undecodable_body", "problem": body.problem})
