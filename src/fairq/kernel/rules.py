"""The queue's rules as pure functions, so every store decides them alike.

A store reads the rows a verb needs with its own set-based SQL, asks these
functions what follows from the values it read, and writes the answers back
with set-based SQL. Nothing here reads a clock, touches a database or keeps
state: each answer depends only on its arguments, so each rule is tested on
its own (tests/test_rules.py) and a new store reuses it instead of copying it.

The rules: the fence verdict on a lease (`fence`), the rotation step a claim
takes and the place a new head joins at (`rotate`, `join_pass`), the settle
decision (`fairq.kernel.policy.decide`), the repeat-enqueue check (`check_repeat`,
with `body_hash`, what a tombstone keeps of a body) and what becomes of an
expired lease whose round budget is spent (`expired_lease_fate`), and an
Inbox's verdict on a delivery (`delivery_verdict`).
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from ..errors import Conflict, LeaseExpired, StaleLease
from ..types import Receipt
from .policy import stride

__all__ = [
    "fence",
    "delivery_verdict",
    "Rotation",
    "rotate",
    "join_pass",
    "body_hash",
    "check_repeat",
    "check_repeat_kind",
    "Quarantine",
    "expired_lease_fate",
]


# -- the fence -----------------------------------------------------------------


def fence(
    event_id: str, generation: int, now_ms: int, *, state: str | None, stored_generation: int | None,
    lease_until_ms: int | None, settled_in_batch: bool = False,
) -> StaleLease | LeaseExpired | None:
    """Why the lease (event_id, generation) may not settle or extend at now_ms,
    or None if it may.

    state, stored_generation and lease_until_ms are the event's stored values
    (state None: no such event). The generation is judged before the time,
    so a holder whose event was claimed again hears StaleLease even if its own
    lease also ran out. settled_in_batch: the event was settled earlier in the
    same batch, which makes a second settle of it stale.
    """
    if settled_in_batch:
        return StaleLease(event_id, generation, f"event {event_id!r} was settled earlier in this batch")
    if state is None:
        return StaleLease(event_id, generation, f"event {event_id!r} does not exist")
    if stored_generation != generation:
        return StaleLease(event_id, generation,
                          f"event {event_id!r} is at generation {stored_generation}, this lease holds {generation}")
    if state != "inflight":
        return StaleLease(event_id, generation, f"event {event_id!r} is {state}, not inflight")
    assert lease_until_ms is not None  # an inflight event always has a lease end
    if now_ms >= lease_until_ms:
        return LeaseExpired(event_id, generation,
                            f"lease on {event_id!r} (generation {generation}) ended at "
                            f"{lease_until_ms / 1000}, now is {now_ms / 1000}")
    return None


# -- the rotation --------------------------------------------------------------


class Rotation(NamedTuple):
    """Where one claim leaves the rotation: the claimed head's new pass, and
    the queue's virtual time (the pass of the last claim) and tail (the
    highest pass handed out, where new heads join)."""

    pass_: int
    vtime: int
    tail: int


def rotate(pass_: int, weight: int, *, vtime: int, tail: int) -> Rotation:
    """The step a claim of a head at `pass_` takes, for a flow of `weight`.

    The turn is taken when the claim is made, whatever becomes of the work:
    the flow moves one stride (smaller for heavier flows) past the later of
    its own pass and the virtual time, so a flow that sat idle cannot bank
    turns. Claiming heads lowest pass first (ties by arrival) gives each
    backlogged flow claims in proportion to its weight.
    """
    start = pass_ if pass_ > vtime else vtime
    new_pass = start + stride(weight)
    return Rotation(new_pass, start, new_pass if new_pass > tail else tail)


def join_pass(tail: int) -> int:
    """The pass a flow's new head gets when the flow was idle: the tail, behind
    every flow in the rotation, so a stream of new flows cannot starve an old one."""
    return tail


# -- repeat enqueues -------------------------------------------------------------


def body_hash(body: str) -> bytes:
    """What a tombstone keeps of a canonical body: its 128-bit BLAKE2b digest."""
    return hashlib.blake2b(body.encode("utf-8"), digest_size=16).digest()


def check_repeat(event_id: str, flow: str | None, body: str, *, stored_flow: str | None,
                 stored_body: str | bytes) -> None:
    """An enqueue of an id already known must match it exactly: raise Conflict
    (field "flow" or "body") if it does not.

    stored_body is the stored canonical body, or the hash a tombstone keeps
    of it (bytes) once the event was purged.
    """
    if stored_flow != flow:
        raise Conflict(
            event_id, "flow",
            f"event {event_id!r} is already stored {_in_flow(stored_flow)}, not {_in_flow(flow)}",
        )
    mine: str | bytes = body_hash(body) if isinstance(stored_body, bytes) else body
    if stored_body != mine:
        raise Conflict(event_id, "body")


def check_repeat_kind(event_id: str, kind: str | None, stored_kind: str | None) -> None:
    """An enqueue of an id already stored must name the kind it was stored
    with: raise Conflict (field "kind") if it does not."""
    if stored_kind != kind:
        raise Conflict(event_id, "kind", f"event {event_id!r} is already stored {_of_kind(stored_kind)}, "
                                         f"not {_of_kind(kind)}")


def _of_kind(kind: str | None) -> str:
    """An event's kind, for messages: "of kind 'email'" or "without a kind"."""
    return "without a kind" if kind is None else f"of kind {kind!r}"


def _in_flow(flow: str | None) -> str:
    """Where an event is, for messages: "in flow 'A'" or "in a flow of its own"."""
    return "in a flow of its own" if flow is None else f"in flow {flow!r}"


# -- expired leases ----------------------------------------------------------------


class Quarantine(NamedTuple):
    """An event to quarantine: the reason stored on it, and the audit cause."""

    reason: str
    cause: str


def expired_lease_fate(attempts: int, max_attempts: int) -> Quarantine | None:
    """What a claim makes of a head whose lease expired: None when the head is
    claimed again (the expiry is audited), a Quarantine when the round's
    budget is spent -- the attempt that expired counted as one."""
    if attempts < max_attempts:
        return None
    return Quarantine(f"lease expired after attempt {attempts} of {max_attempts}; retry budget spent",
                      "attempts_exhausted")


def delivery_verdict(found: tuple[str | None, int, str] | None, flow: str | None, seq: int, body: str,
                     last_seq: int | None) -> Receipt | None:
    """What a delivery is to an Inbox, before any effect; None: new and next in its flow.

    found: the receipt already stored under the delivery's id (flow, seq,
    body), if any. last_seq: the highest seq accepted in the flow (0 for
    none; None when the delivery has no flow).
    """
    if found is not None:
        # The same id always carries the same flow, seq and body.
        same = found[0] == flow and int(found[1]) == seq and found[2] == body
        return Receipt.DUPLICATE if same else Receipt.ID_CONFLICT
    if last_seq is None:
        return None
    # Within a flow, positions are taken in order, one event each.
    if seq <= last_seq:
        return Receipt.SEQUENCE_CONFLICT
    if seq > last_seq + 1:
        return Receipt.GAP
    return None
