"""The SQL of claim: lease the next heads in rotation order.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
One statement promotes the heads whose time has come (only when the
waiting index's earliest entry, read with the state row, says one has);
per page of heads, one reads a page of the rotation index and one writes
the claims (a claim of one head that promoted nothing takes the first head
the state row was read with, and reads no page). What becomes of each head
read (claimed, its expired lease audited, or quarantined), the rotation
step and the Lease are fairq.kernel.claims' to say.
"""

from __future__ import annotations

from typing import Any

from ...kernel.claims import Head, claim_head
from ...types import Lease
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
        for read in rows:
            head = Head._make(read)
            verdict = claim_head(tx, head, vtime=row.vtime, tail=row.tail, owner=owner, now_ms=now_ms,
                                 lease_until_ms=lease_until, max_attempts=max_attempts)
            if verdict is None:
                continue
            step = verdict.step
            row.vtime, row.tail = step.vtime, step.tail
            from_ready += verdict.was_ready
            claimed.append((lease_until, owner, now_ms, step.pass_, tx.next_turn(), lease_until, head.id))
            leases.append(verdict.lease)
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

