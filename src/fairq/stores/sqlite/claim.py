"""The SQL of claim: lease the next heads in rotation order.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
One statement promotes the heads whose time has come (only when the
waiting index's earliest entry, read with the state row, says one has);
per page of heads, one reads a page of the rotation index and one writes
the claims (a claim of one head that promoted nothing takes the first head
the state row was read with, and reads no page). What becomes of each head
read (claimed, its expired lease audited, or quarantined), the rotation
step and the Lease are fairq.kernel.claims' to say.

Heads of no tenant are in the rotation index; tenants take their turns
beside them (store.tenant_claim): each claim goes to the lower (pass, turn)
of the first head of no tenant and the first claimable tenant. When the
state row says no tenant is claimable, nothing else is read: a queue
without tenants claims exactly as it did before tenants existed.
"""

from __future__ import annotations

from typing import Any

from ...kernel.claims import Head, claim_head
from ...types import Lease
from . import tenant_claim
from .txn import TxnCore

# A page of heads of no tenant, in rotation order (the columns of a Head,
# then the turn), through the rotation index only.
_PAGE = (
    "SELECT e.id, e.event_id, f.name, f.weight, e.seq, e.body, e.pass, e.state, "
    "e.generation, e.attempts, e.lifetime_attempts, e.lease_until_ms, e.owner, "
    "e.due_ms, e.first_claim_ms, e.kind, e.max_attempts, e.timeout_ms, e.turn "
    "FROM event AS e INDEXED BY event_rotation LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
    "WHERE e.runnable = 1 AND e.tenant_id IS NULL ORDER BY e.pass, e.turn LIMIT :limit"
)

# The claimed head becomes inflight with a new generation, its attempt
# counted durably before any work starts, and waits in the waiting index
# until its lease ends or it is settled. (Positional parameters, in the
# order written: the claim's hot statement.)
_LEASE = (
    "UPDATE event SET state = 'inflight', generation = generation + 1, "
    "attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1, "
    "next_at_ms = NULL, lease_until_ms = ?, owner = ?, "
    "first_claim_ms = coalesce(first_claim_ms, ?), pass = ?, turn = ?, "
    "dispatch_ms = ?, runnable = 0 WHERE id = ?"
)


def claim_many(tx: TxnCore, n: int, *, owner: str | None, now_ms: int, lease_ms: int,
               max_attempts: int) -> list[Lease]:
    """Claim up to n heads, one per flow, lowest rotation position first."""
    conn = tx.connection
    promoted = 0
    if tx.heads_may_be_due(now_ms):
        promoted = tenant_claim.promote(tx, now_ms)
    released = tenant_claim.release_holds(tx, now_ms)
    tenants = tenant_claim.TenantLevel(tx, now_ms) if tenant_claim.in_play(tx, bool(promoted or released)) else None
    row = tx.state_row()
    leases: list[Lease] = []
    lease_until = now_ms + lease_ms
    from_ready = 0  # claims of ready heads; the others reclaim an expired lease
    page: list[tuple[Any, ...]] = []
    at = 0  # the next head of the page
    exhausted = False
    claimed: list[tuple[Any, ...]] = []  # _LEASE's parameters, in its order
    # The first head read with the state row is still the first if nothing
    # was promoted since: a claim of one needs no page of its own.
    first = tx.first_head()
    while len(leases) < n:
        if at == len(page) and not exhausted:
            if claimed:  # written before the next page is read past them
                tx.cursor.executemany(_LEASE, claimed)
                claimed = []
            limit = n - len(leases)
            if first is not None and limit == 1 and not promoted:
                page = first
            else:
                # Only heads in the rotation index are read, in rotation order.
                page = conn.execute(_PAGE, {"limit": limit}).fetchall()
            first = None
            at = 0
            exhausted = len(page) < limit  # a short page: nothing else of no tenant is runnable
        read = page[at] if at < len(page) else None
        tenant = tenants.first() if tenants is not None else None
        if tenants is not None and tenant is not None and (read is None or tenant.place < (read[6], read[18])):
            # The tenant's turn comes first: its own head, claimed and written at once.
            taken = tenants.claim(tenant, owner=owner, lease_until_ms=lease_until, max_attempts=max_attempts)
            if taken is not None:
                won, params = taken
                tx.cursor.execute(_LEASE, params)
                from_ready += won.was_ready
                leases.append(won.lease)
            continue
        if read is None:
            break
        at += 1
        head = Head._make(read[:18])
        verdict = claim_head(tx, head, vtime=row.vtime, tail=row.tail, owner=owner, now_ms=now_ms,
                             lease_until_ms=lease_until, max_attempts=max_attempts)
        if verdict is None:
            continue
        step = verdict.step
        row.vtime, row.tail = step.vtime, step.tail
        from_ready += verdict.was_ready
        claimed.append((lease_until, owner, now_ms, step.pass_, tx.next_turn(), lease_until, head.id))
        leases.append(verdict.lease)
    if claimed:
        tx.cursor.executemany(_LEASE, claimed)
    tx.moved("ready", "inflight", from_ready)
    tx.happened("claimed", len(leases))
    if not promoted and not released and (tenants is None or not tenants.wrote):
        tx.leave_time_unstored()
    return leases
