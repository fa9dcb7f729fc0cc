"""The tenant level of a claim (store.claim): which tenant's turn it is, its
limits, and the step its claim takes at both levels.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
A claim first lets go the tenants whose hold is over (one statement, only
when the state row's earliest hold end says one is). Each tenant candidate
is one statement: the claimable tenant with the lowest (pass, turn), read
through its rotation index, with its own first runnable head. Its limits
(fairq.kernel.tenants.blocked_by) are judged on its live leases (one
statement, only for a tenant with a cap); a tenant at a limit is held until
it may be claimed again and keeps its place. What becomes of the head is
fairq.kernel.claims' to say, and the step both levels take
fairq.kernel.tenants.tenant_step's.

tenant.runnable, which makes a tenant claimable, counts its runnable heads:
a claim takes one off for each head of the tenant it claims or quarantines,
and adds the heads of tenants its promotion made runnable (`promote`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...kernel.claims import Claimed, Head, claim_head
from ...kernel.tenants import Bucket, Limit, blocked_by, tenant_step
from .tenant_rows import Counts
from .txn import TxnCore


class Candidate(NamedTuple):
    """The claimable tenant with the lowest place, as read, with its first runnable head."""

    tenant_id: int
    weight: int
    max_inflight: int
    rate: int
    burst: int
    pass_: int
    turn: int
    vtime: int
    tail: int
    tokens_milli: int | None
    at_ms: int | None
    head: Head | None  # None only if the count of runnable heads were wrong

    @property
    def place(self) -> tuple[int, int]:
        """(pass, turn): the tenant's place in the rotation."""
        return self.pass_, self.turn

    def bucket(self) -> Bucket | None:
        """Its token bucket as stored (None: full)."""
        return None if self.tokens_milli is None or self.at_ms is None else Bucket(self.tokens_milli, self.at_ms)


# The claimable tenant (a runnable head, not held) lowest in the rotation,
# through its rotation index, and its runnable head lowest in its own
# rotation, through theirs: one index step each.
_FIRST = (
    "SELECT t.tenant_id, t.weight, t.max_inflight, t.rate, t.burst, t.pass, t.turn, t.vtime, t.tail, "
    "t.tokens_milli, t.at_ms, "
    "h.id, h.event_id, f.name, f.weight, h.seq, h.body, h.pass, h.state, "
    "h.generation, h.attempts, h.lifetime_attempts, h.lease_until_ms, h.owner, h.due_ms, h.first_claim_ms, "
    "h.kind, h.max_attempts, h.timeout_ms "
    "FROM tenant AS t INDEXED BY tenant_rotation "
    "LEFT JOIN event AS h ON h.id = (SELECT e.id FROM event AS e INDEXED BY event_tenant_rotation "
    "WHERE e.tenant_id = t.tenant_id AND e.runnable = 1 ORDER BY e.pass, e.turn LIMIT 1) "
    "LEFT JOIN flow AS f ON f.flow_id = h.flow_id "
    "WHERE t.runnable > 0 AND t.held_until_ms = 0 ORDER BY t.pass, t.turn LIMIT 1"
)

# A tenant's live leases (lease end after now), earliest first, counted up
# to its cap: every leased event is a head, so its heads' index holds them.
_LEASES = (
    "SELECT count(*), min(lease_until_ms) FROM (SELECT lease_until_ms FROM event "
    "INDEXED BY event_tenant_heads WHERE tenant_id = :tenant_id AND pass IS NOT NULL "
    "AND lease_until_ms > :now_ms ORDER BY lease_until_ms LIMIT :cap)"
)

# The step a claim of the tenant took: its new place, its own rotation's
# vtime and tail, its bucket after the token taken, one runnable head fewer
# (the one claimed) and one ready event fewer if it was ready (else its
# lease had expired).
_STEP = (
    "UPDATE tenant SET pass = :pass, turn = :turn, vtime = :vtime, tail = :tail, "
    "tokens_milli = :tokens_milli, at_ms = :at_ms, runnable = runnable - 1, ready_n = ready_n - :was_ready "
    "WHERE tenant_id = :tenant_id"
)

# Heads whose time has come (delay or backoff over, lease expired) enter the
# rotation indexes; heads still waiting cost nothing here.
_PROMOTE = "UPDATE event SET runnable = 1 WHERE runnable = 0 AND dispatch_ms <= :now_ms"


def promote(tx: TxnCore, now_ms: int) -> int:
    """Make the heads that came due by now_ms runnable; how many. Each
    tenant counts its own among them."""
    if tx.state_row().any_tenant is False:
        return int(tx.connection.execute(_PROMOTE, {"now_ms": now_ms}).rowcount)
    promoted = tx.connection.execute(_PROMOTE + " RETURNING tenant_id", {"now_ms": now_ms}).fetchall()
    counts = Counts()
    for (tenant_id,) in promoted:
        counts.add(tenant_id, 1)
    counts.write(tx)
    return len(promoted)


def release_holds(tx: TxnCore, now_ms: int) -> int:
    """Let go every tenant whose hold is over by now_ms (when the state row
    says one may be); how many."""
    held = tx.state_row().held_ms
    if held is not None and (held == 0 or held > now_ms):
        return 0
    # A held tenant is out of the tenants' rotation index until its hold ends.
    return tx.connection.execute(
        "UPDATE tenant SET held_until_ms = 0 WHERE held_until_ms > 0 AND held_until_ms <= :now_ms",
        {"now_ms": now_ms},
    ).rowcount


def in_play(tx: TxnCore, changed: bool) -> bool:
    """Whether a tenant may be claimable in this claim: the state row says
    one is, or the claim made heads runnable or let holds go in a queue that
    has tenants (or the state row was read without the tenants' facts)."""
    row = tx.state_row()
    if row.tenant_ready is None or row.any_tenant is None:
        return True
    return row.tenant_ready or (changed and row.any_tenant)


class TenantLevel:
    """The tenants' side of one claim: the candidate, its limits, its step."""

    __slots__ = ("_tx", "_now_ms", "_first", "_read", "wrote")

    def __init__(self, tx: TxnCore, now_ms: int) -> None:
        self._tx = tx
        self._now_ms = now_ms
        self._first: Candidate | None = None
        self._read = False  # whether _first is the candidate as it stands
        self.wrote = False  # whether a tenant row was written (a hold, a step)

    def first(self) -> Candidate | None:
        """The claimable tenant lowest in the rotation (None: there is none)."""
        if not self._read:
            found = self._tx.cursor.execute(_FIRST).fetchone()
            self._first = None if found is None else Candidate._make(
                (*found[:11], None if found[11] is None else Head._make(found[11:])))
            self._read = True
        return self._first

    def claim(self, tenant: Candidate, *, owner: str | None, lease_until_ms: int,
              max_attempts: int) -> tuple[Claimed, tuple[Any, ...]] | None:
        """Claim the tenant's head, or hold the tenant at its limit; None when
        nothing was claimed (held, or its head quarantined instead). Else the
        claim and the parameters of store.claim's lease statement, which the
        caller runs at once. Either way the next candidate is read again."""
        tx, now_ms = self._tx, self._now_ms
        self._read = False
        self.wrote = True
        inflight = lease_end = None
        if tenant.max_inflight > 0:
            inflight, lease_end = tx.cursor.execute(
                _LEASES, {"tenant_id": tenant.tenant_id, "now_ms": now_ms, "cap": tenant.max_inflight}).fetchone()
        bucket = tenant.bucket()
        blocked = blocked_by(now_ms, inflight=inflight or 0, max_inflight=tenant.max_inflight, bucket=bucket,
                             rate=tenant.rate, burst=tenant.burst, lease_end_ms=lease_end)
        if blocked is not None:
            # At its cap until its earliest lease ends (or one is settled), out
            # of tokens until the next is there: skipped, its place kept.
            assert blocked.until_ms is not None and (blocked.limit is Limit.RATE or lease_end is not None)
            tx.connection.execute("UPDATE tenant SET held_until_ms = :until WHERE tenant_id = :tenant_id",
                                  {"until": blocked.until_ms, "tenant_id": tenant.tenant_id})
            return None
        head = tenant.head
        if head is None:
            _recount(tx, tenant.tenant_id)
            return None
        verdict = claim_head(tx, head, vtime=tenant.vtime, tail=tenant.tail, owner=owner, now_ms=now_ms,
                             lease_until_ms=lease_until_ms, max_attempts=max_attempts)
        if verdict is None:
            # Quarantined: the tenant does not move, and has one runnable head
            # fewer (and one ready event fewer if it was ready).
            tx.connection.execute(
                "UPDATE tenant SET runnable = runnable - 1, ready_n = ready_n - :was_ready "
                "WHERE tenant_id = :tenant_id", {"tenant_id": tenant.tenant_id, "was_ready": int(head.state == "ready")})
            return None
        row = tx.state_row()
        step = tenant_step(tenant.pass_, tenant.weight, head.pass_, head.weight or 1, vtime=row.vtime,
                           tail=row.tail, tenant_vtime=tenant.vtime, tenant_tail=tenant.tail)
        row.vtime, row.tail = step.tenant.vtime, step.tenant.tail
        tenant_turn = tx.next_turn()
        head_turn = tx.next_turn()
        if tenant.rate > 0:
            bucket = (bucket or Bucket.full(tenant.burst, now_ms)).take(now_ms, tenant.rate, tenant.burst)
            assert bucket is not None  # not blocked: a whole token is there
        tx.connection.execute(_STEP, {
            "pass": step.tenant.pass_, "turn": tenant_turn, "vtime": step.flow.vtime, "tail": step.flow.tail,
            "tokens_milli": None if bucket is None else bucket.tokens_milli,
            "at_ms": None if bucket is None else bucket.at_ms, "was_ready": int(verdict.was_ready),
            "tenant_id": tenant.tenant_id})
        return verdict, (lease_until_ms, owner, now_ms, step.flow.pass_, head_turn, lease_until_ms, head.id)


def _recount(tx: TxnCore, tenant_id: int) -> None:
    """A tenant counted a runnable head it has not: count them again (the
    triggers keep the count exact, so only a damaged file gets here)."""
    tx.connection.execute(
        "UPDATE tenant SET runnable = (SELECT count(*) FROM event INDEXED BY event_tenant_rotation "
        "WHERE tenant_id = :tenant_id AND runnable = 1) WHERE tenant_id = :tenant_id",
        {"tenant_id": tenant_id})
