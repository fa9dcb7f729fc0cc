"""The SQL of claim on PostgreSQL: lease the next heads in rotation order, fairly,
with many claimers at once.

Runs inside a queue write transaction (TxnCore); never commits. A claim
never waits for a row another transaction holds. One statement promotes the
heads whose time has come, skipping any head another transaction has
locked: that head is being settled, extended or redriven (which decides its
next place itself), or promoted by another claim (it is claimable once that
claim commits, which then wakes sleeping workers). Then, per page:
candidates are read in rotation order without locking; only the candidates
whose position (pass, turn) is still the one read are locked, FOR UPDATE
SKIP LOCKED. A head another claimer re-queued meanwhile is not taken at its
new position, which would let virtual time run ahead and flatten the
weights. Rotation order is exact among the heads no other transaction
holds; a held head keeps its place and is taken by a later claim. What
becomes of each head locked (claimed, its expired lease audited, or
quarantined), the rotation step and the Lease are fairq.kernel.claims' to
say. Lock order everywhere: flow, then head, then event.
"""

from __future__ import annotations

from typing import Any

from ...kernel.claims import Head, claim_head
from ...types import Lease
from .txn import TxnCore

#: The most candidates one page reads (a claim of more heads reads more pages).
_MAX_PAGE = 1000


def claim_many(tx: TxnCore, n: int, *, owner: str | None, now_ms: int, lease_ms: int,
               max_attempts: int) -> list[Lease]:
    """Claim up to n heads, one per flow, lowest rotation position first."""
    # Heads whose time has come (delay or backoff over, lease expired) enter
    # the rotation index; heads still waiting cost nothing here. Locked in
    # event order through head_waiting, skipping heads another transaction
    # holds (never waiting for one); then updated by primary key.
    promoted = tx.execute(
        "UPDATE head SET runnable = true WHERE event_pk = ANY(ARRAY(SELECT event_pk FROM head "
        "WHERE NOT runnable AND dispatch_ms <= %(now_ms)s ORDER BY event_pk FOR UPDATE SKIP LOCKED))",
        {"now_ms": now_ms},
    ).rowcount
    leases: list[Lease] = []
    lease_until = now_ms + lease_ms
    seen: list[int] = []  # candidates already judged by this claim
    from_ready = 0
    while len(leases) < n:
        want = n - len(leases)
        # Candidates from the snapshot, in rotation order, through head_rotation.
        candidates = tx.execute(
            "SELECT event_pk, pass, turn FROM head WHERE runnable AND NOT (event_pk = ANY(%(seen)s::bigint[])) "
            "ORDER BY pass, turn LIMIT %(limit)s",
            {"seen": seen, "limit": min(2 * want + 2, _MAX_PAGE)},
        ).fetchall()
        if not candidates:
            break
        # Only candidates still at the position read are locked; one another
        # claimer holds is skipped, one it moved is left at its new place.
        rows = tx.execute(
            "SELECT e.id, e.event_id, f.name, f.weight, e.seq, e.body, h.pass, e.state, e.generation, "
            "e.attempts, e.lifetime_attempts, e.lease_until_ms, e.owner, e.due_ms, e.first_claim_ms "
            "FROM head AS h JOIN unnest(%(pk)s::bigint[], %(pass)s::bigint[], %(turn)s::bigint[]) "
            "AS c(pk, pass, turn) ON h.event_pk = c.pk AND h.pass = c.pass AND h.turn = c.turn "
            "JOIN event AS e ON e.id = h.event_pk LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
            "WHERE h.runnable ORDER BY h.pass, h.turn LIMIT %(limit)s FOR UPDATE OF h SKIP LOCKED",
            {"pk": [c[0] for c in candidates], "pass": [c[1] for c in candidates],
             "turn": [c[2] for c in candidates], "limit": want},
        ).fetchall()
        # Judged here, or skipped (another claimer holds or moved it): not read again.
        seen.extend(int(r[0]) for r in rows) if len(rows) == want else seen.extend(int(c[0]) for c in candidates)
        claimed: list[tuple[int, int]] = []
        for read in rows:
            head = Head._make(read)
            vtime, tail = tx.rotation()
            verdict = claim_head(tx, head, vtime=vtime, tail=tail, owner=owner, now_ms=now_ms,
                                 lease_until_ms=lease_until, max_attempts=max_attempts)
            if verdict is not None:
                tx.moved_rotation(verdict.step.vtime, verdict.step.tail)
                leases.append(verdict.lease)
                claimed.append((head.id, verdict.step.pass_))
                from_ready += verdict.was_ready
        _write_claims(tx, claimed, owner=owner, now_ms=now_ms, lease_until=lease_until)
    tx.moved("ready", "inflight", from_ready)
    tx.happened("claimed", len(leases))
    if promoted > len(leases):
        # Heads this claim promoted and left were invisible to claims running
        # beside it: they look again once it commits.
        tx.wake(promoted - len(leases))
    if not promoted:
        tx.leave_time_unstored()
    return leases


def _write_claims(tx: TxnCore, claimed: list[tuple[int, int]], *, owner: str | None, now_ms: int,
                  lease_until: int) -> None:
    if not claimed:
        return
    # One statement. The head moves to its new rotation place (turns taken in
    # claim order) and waits in head_waiting until its lease ends or it is
    # settled; the claimed event becomes inflight with a new generation, its
    # attempt counted durably before any work starts.
    tx.execute(
        "WITH c AS (SELECT c.pk, c.pass, nextval('turn_seq') AS turn FROM unnest(%(pk)s::bigint[], "
        "%(pass)s::bigint[]) WITH ORDINALITY AS c(pk, pass, i) ORDER BY c.i), "
        "h AS (UPDATE head SET pass = c.pass, turn = c.turn, dispatch_ms = %(lease_until)s, runnable = false "
        "FROM c WHERE head.event_pk = c.pk RETURNING head.event_pk) "
        "UPDATE event SET state = 'inflight', generation = generation + 1, attempts = attempts + 1, "
        "lifetime_attempts = lifetime_attempts + 1, next_at_ms = NULL, lease_until_ms = %(lease_until)s, "
        "owner = %(owner)s, first_claim_ms = coalesce(first_claim_ms, %(now_ms)s) "
        "WHERE id IN (SELECT event_pk FROM h)",
        {"pk": [pk for pk, _ in claimed], "pass": [new_pass for _, new_pass in claimed],
         "lease_until": lease_until, "owner": owner, "now_ms": now_ms},
    )
