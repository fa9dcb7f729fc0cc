"""Tenants as pure rules: the two-level rotation a claim takes, and the limits
(`max_inflight`, `rate`/`burst`) that can hold a tenant back. A tenant is a
group of flows (a customer's) that shares one turn in the rotation, whatever
its number of flows. Both stores claim by these rules (SQLite:
stores/sqlite/tenant_claim.py; PostgreSQL: fairq_claim in
migrations/verbs.sql, with the same steps in SQL); a flow without a tenant is
the case below where each flow is its own tenant.

Nothing here reads a clock, runs SQL or keeps state: a store reads the values,
asks these functions, and writes the answers back (as with fairq.kernel.rules).

The rotation, in two levels, each one the one-level rotation of
`fairq.kernel.rules` (`rotate`, `join_pass`) applied to its own members:

* Tenant level: the tenants that have a claimable head, by tenant weight.
  Each tenant keeps a pass and a turn; the queue keeps the tenant level's
  vtime and tail. A claim goes to the tenant with the lowest (pass, turn)
  that no limit holds back (`blocked_by`).
* Flow level: within the chosen tenant, its flows with a claimable head, by
  flow weight. Each flow's head keeps a pass and a turn, as in the one-level rotation; each
  tenant keeps its own vtime and tail for its flows. The claim goes to the
  tenant's head with the lowest (pass, turn).
* Within a flow: strict order.

`tenant_step` is the step one claim takes at both levels: the turn is taken at
claim time at both. Ties at either level go to the lower turn (the queue's one
arrival counter, set at join and at claim). A tenant that has a head
(claimable, leased or waiting) keeps its pass, as a flow whose head waits keeps
its own; a tenant left with no head at all leaves the rotation, and `join`
says where it and its flow come back. A tenant's share therefore does not
depend on how many flows it has: the tenant level never looks at them.

A flow without a tenant is its own tenant, with the flow's weight as the
tenant's weight. Its flow level has one member and decides nothing, so a queue
whose flows all have no tenant claims in exactly the one-level order of
fairq.kernel.rules.

Limits: a tenant at its cap or out of tokens is skipped without losing its
place -- its pass does not move -- so once free it goes before every tenant
that passed it meanwhile (and banks no turns: its next step starts from the
vtime, like a flow back from waiting). `Bucket` is the token bucket for `rate` and `burst`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from ..errors import InvalidInput
from .rules import Rotation, join_pass, rotate

__all__ = ["TwoLevel", "tenant_step", "Joined", "join", "MILLI", "Bucket", "Limit", "Blocked", "at_cap",
           "blocked_by"]


# -- the two-level rotation ---------------------------------------------------------


class TwoLevel(NamedTuple):
    """Where one claim leaves both levels.

    tenant: the claimed tenant's new pass, and the queue's new tenant vtime and tail.
    flow: the claimed head's new pass, and the tenant's own new vtime and tail.
    """

    tenant: Rotation
    flow: Rotation


def tenant_step(tenant_pass: int, tenant_weight: int, flow_pass: int, flow_weight: int, *, vtime: int, tail: int,
                tenant_vtime: int, tenant_tail: int) -> TwoLevel:
    """The step a claim takes: the tenant at `tenant_pass` moves one tenant
    stride along the tenant level (the queue's `vtime`, `tail`), and the
    claimed head at `flow_pass` moves one flow stride along its tenant's
    flow level (the tenant's own `tenant_vtime`, `tenant_tail`).

    Each level is `rules.rotate`: past the later of the member's pass and
    its level's vtime, so neither an idle tenant nor an idle flow banks turns.
    The store writes `.tenant.pass_` on the tenant, `.tenant.vtime/.tail` on
    the queue, `.flow.pass_` on the head and `.flow.vtime/.tail` on the tenant.
    """
    return TwoLevel(rotate(tenant_pass, tenant_weight, vtime=vtime, tail=tail),
                    rotate(flow_pass, flow_weight, vtime=tenant_vtime, tail=tenant_tail))


class Joined(NamedTuple):
    """Where a flow that gets a head again enters: the tenant's pass (kept if
    the tenant is in the rotation, else the queue's tail) and the new head's
    pass (its tenant's tail)."""

    tenant_pass: int
    flow_pass: int


def join(*, tail: int, tenant_tail: int, tenant_pass: int | None) -> Joined:
    """The passes when an idle flow gets a head (an enqueue to an empty flow).

    tail: the queue's tenant-level tail; tenant_tail: the tenant's own tail;
    tenant_pass: the tenant's pass while it has any head, None when it has
    none (then it joins behind every tenant, and the store gives it a new
    turn). New flows and new tenants thus queue behind the ones already
    waiting, so no stream of them can starve an old one.
    """
    return Joined(join_pass(tail) if tenant_pass is None else tenant_pass, join_pass(tenant_tail))


# -- the token bucket -----------------------------------------------------------------

#: A bucket counts in thousandths of a token, so a rate of r claims per second
#: refills exactly r milli-tokens per millisecond, with integers only.
MILLI = 1000


def _check(rate: int, burst: int) -> None:
    """Refuse a rate or burst no bucket can follow (InvalidInput names the field)."""
    if rate < 0:
        raise InvalidInput("rate", "must be >= 0 (0: no limit)")
    if rate > 0 and burst < 1:
        raise InvalidInput("burst", "must be at least 1 when a rate is set")
    if rate > burst * MILLI:
        raise InvalidInput("burst", "must be at least rate / 1000: a millisecond clock hands out at most "
                                    "burst claims in one millisecond")


@dataclass(frozen=True, slots=True)
class Bucket:
    """A tenant's token bucket: it held `tokens_milli` thousandths of a token
    at `at_ms` (the queue's clock). It refills at `rate` tokens per second,
    never beyond `burst` whole tokens; a claim takes one whole token.

    rate and burst are the tenant's settings (whole claims per second and
    claims at once), passed in each call so a changed setting applies at
    once; rate 0 means no limit (every take succeeds and changes nothing).
    Time earlier than `at_ms` (a clock that went back) adds no tokens.

    A full bucket keeps the part of a token earned in the millisecond it
    filled (less than one millisecond's refill beyond burst, never a whole
    token more): claims made on whole milliseconds then lose nothing, so
    over any run the claims are burst + rate * seconds, within one.
    """

    tokens_milli: int
    at_ms: int

    @classmethod
    def full(cls, burst: int, now_ms: int) -> Bucket:
        """A new tenant's bucket: `burst` tokens at now_ms."""
        return cls(burst * MILLI, now_ms)

    def level(self, now_ms: int, rate: int, burst: int) -> int:
        """The milli-tokens held at now_ms: never burst + 1 whole tokens.

        The elapsed time counted is capped at the time a refill from empty
        takes, so the product stays small enough for a 64-bit column.
        """
        _check(rate, burst)
        if rate == 0:
            return burst * MILLI
        cap = burst * MILLI + min(rate, MILLI) - 1
        elapsed = min(max(now_ms - self.at_ms, 0), -(-cap // rate))
        return min(cap, self.tokens_milli + elapsed * rate)

    def take(self, now_ms: int, rate: int, burst: int) -> Bucket | None:
        """The bucket after one claim at now_ms, or None when no whole token is there."""
        if rate == 0:
            return self
        held = self.level(now_ms, rate, burst)
        if held < MILLI:
            return None
        return Bucket(held - MILLI, max(now_ms, self.at_ms))

    def ready_at(self, now_ms: int, rate: int, burst: int) -> int:
        """The earliest time, no earlier than now_ms, at which a whole token is there."""
        if rate == 0:
            return now_ms
        held = self.level(now_ms, rate, burst)
        if held >= MILLI:
            return now_ms
        return max(now_ms, self.at_ms) + -(-(MILLI - held) // rate)


# -- the limits -----------------------------------------------------------------------


class Limit(str, Enum):
    """A limit that can hold a tenant back; the value is the setting's name."""

    MAX_INFLIGHT = "max_inflight"
    RATE = "rate"


class Blocked(NamedTuple):
    """Why a tenant is skipped: the limit that holds, and until when.

    For RATE, until_ms is when the next token is there. For MAX_INFLIGHT it
    is the earliest end among the tenant's leases when the store gives it (a
    settle may free a slot sooner), else None: until a lease is settled.
    """

    limit: Limit
    until_ms: int | None


def at_cap(inflight: int, max_inflight: int) -> bool:
    """Whether a tenant with `inflight` leased events may not take another:
    at most max_inflight at once; 0 means no limit."""
    return max_inflight > 0 and inflight >= max_inflight


def blocked_by(now_ms: int, *, inflight: int, max_inflight: int, bucket: Bucket | None, rate: int, burst: int,
               lease_end_ms: int | None = None) -> Blocked | None:
    """Which limit holds a tenant back at now_ms, or None when it may be claimed.

    bucket None: the tenant has none stored yet (it is full). The cap is
    named first: a tenant at its cap waits for a slot whatever its tokens.
    A claim of a tenant that is not blocked takes `bucket.take(...)`, which
    then succeeds. A blocked tenant is skipped and its pass left as it is.
    """
    if at_cap(inflight, max_inflight):
        return Blocked(Limit.MAX_INFLIGHT, lease_end_ms)
    if rate == 0:
        return None
    held = bucket if bucket is not None else Bucket.full(burst, now_ms)
    until = held.ready_at(now_ms, rate, burst)
    return None if until <= now_ms else Blocked(Limit.RATE, until)
