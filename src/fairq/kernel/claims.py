"""What a claim makes of each head it reaches, the same on every store.

A store reads the heads in rotation order with its own SQL and hands each,
as a `Head`, to `claim_head`: a head whose stored body cannot be decoded
here is quarantined (instead of stalling every claim that reaches it); an
expired lease is claimed again, audited, or, its round budget spent,
quarantined (`fairq.kernel.rules.expired_lease_fate`); a first claim adds
its lag to the histogram; the claim takes its rotation step
(`fairq.kernel.rules.rotate`) and the holder gets its `Lease`. The store
then writes the claimed heads with its own statement. `quarantine_leased`
does the same for heads a store leased before decoding their bodies.
Nothing here runs SQL or reads a clock: what is written goes through the
transaction's own statements (`Claimer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from .._json import body_value
from ..types import Lease, UndecodableBody
from . import rules
from .policy import from_ms
from .rows import Recorder, audit_row

__all__ = ["Head", "Claimer", "Claimed", "Stop", "claim_head", "undecodable", "stop_heads", "quarantine_leased"]


class Head(NamedTuple):
    """A head as a claim reads it: the event's row id and id, its flow's name
    and weight, and the stored values a claim judges."""

    id: int
    event_id: str
    flow: str | None
    weight: int | None
    seq: int
    body: str
    pass_: int
    state: str
    generation: int
    attempts: int
    lifetime_attempts: int
    lease_until_ms: int | None
    owner: str | None
    due_ms: int
    first_claim_ms: int | None
    kind: str | None = None
    max_attempts: int | None = None  # the event's own budget (None: the queue's)
    timeout_ms: int | None = None


class Claimer(Recorder, Protocol):
    """A store's write transaction as a claim uses it: it counts, audits,
    keeps the claim-lag histogram and quarantines heads."""

    def claim_lag(self, lag_ms: int) -> None: ...

    def quarantine(self, ids: Sequence[int], reasons: Sequence[str | None]) -> None: ...

    def append_audit(self, rows: list[dict[str, Any]]) -> None: ...


class Claimed(NamedTuple):
    """A head claimed: the holder's lease, the rotation step the claim took
    (the head's new pass, the queue's new virtual time and tail), and
    whether the head was ready (else its lease had expired)."""

    lease: Lease
    step: rules.Rotation
    was_ready: bool


class Stop(NamedTuple):
    """A head to quarantine: its row id, the state it leaves, the reason
    stored on it, and its audit row."""

    id: int
    state: str
    reason: str
    audit: dict[str, Any]


def undecodable(head_id: int, event_id: str, state: str, generation: int, problem: str, now_ms: int) -> Stop:
    """A head whose stored body this process cannot decode: it stops; a
    redrive gives it a new round."""
    return Stop(head_id, state, f"undecodable_body: {problem}",
                audit_row(event_id, "quarantine", "undecodable_body", None, generation, now_ms,
                          {"cause": "undecodable_body", "problem": problem}))


def stop_heads(tx: Claimer, stops: Sequence[Stop]) -> None:
    """Quarantine the heads, counted and audited (in the order given)."""
    if not stops:
        return
    tx.quarantine([s.id for s in stops], [s.reason for s in stops])
    for stop in stops:
        tx.moved(stop.state, "quarantined")
    tx.happened("quarantined", len(stops))
    tx.append_audit([s.audit for s in stops])


def claim_head(tx: Claimer, head: Head, *, vtime: int, tail: int, owner: str | None, now_ms: int,
               lease_until_ms: int, max_attempts: int) -> Claimed | None:
    """Judge one head a claim reached, at the rotation (vtime, tail) as it
    stands; None when the head is quarantined instead (written through tx).
    The caller writes the claim and moves the rotation to `Claimed.step`."""
    if head.state != "ready":
        tx.happened("expired")
    value = body_value(head.body)
    if isinstance(value, UndecodableBody):
        stop_heads(tx, [undecodable(head.id, head.event_id, head.state, head.generation, value.problem, now_ms)])
        return None
    if head.state != "ready":
        spent = rules.expired_lease_fate(head.attempts,
                                         max_attempts if head.max_attempts is None else head.max_attempts)
        if spent is not None:
            # An expired head whose round budget is spent stops, and blocks its flow.
            stop_heads(tx, [Stop(head.id, "inflight", spent.reason, audit_row(
                head.event_id, "quarantine", spent.reason, head.owner, head.generation, now_ms,
                {"cause": spent.cause, "attempts": head.attempts, "lifetime_attempts": head.lifetime_attempts,
                 "lease_until": from_ms(head.lease_until_ms)}))])
            return None
        tx.record(head.event_id, "expired", "lease expired before the holder settled", head.owner,
                  head.generation, now_ms, {"lease_until": from_ms(head.lease_until_ms), "attempts": head.attempts})
    if head.first_claim_ms is None:
        tx.claim_lag(now_ms - head.due_ms)
    # The turn is taken now, at claim time, not when the work succeeds.
    step = rules.rotate(head.pass_, head.weight or 1, vtime=vtime, tail=tail)
    lease = Lease(head.event_id, head.flow, head.seq, value, head.generation + 1, head.attempts + 1,
                  head.lifetime_attempts + 1, owner, lease_until_ms / 1000, head.kind,
                  None if head.timeout_ms is None else head.timeout_ms / 1000)
    return Claimed(lease, step, head.state == "ready")


def quarantine_leased(tx: Claimer, found: Sequence[tuple[int, Lease, UndecodableBody]], now_ms: int) -> None:
    """Quarantine heads leased before their bodies were decoded (row id, the
    lease taken, what the body is), each still under that lease."""
    stops = [undecodable(head_id, lease.event_id, "inflight", lease.generation, body.problem, now_ms)
             for head_id, lease, body in found]
    stop_heads(tx, stops)
