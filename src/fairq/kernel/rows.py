"""Rows as every store reads them, and what they become.

Each store reads its rows with its own SQL, in the column orders named here,
and hands them to these functions: the records a verb judges (`Held`, an
event under a lease; `StoredId`, an event id already stored or tombstoned),
the rules' verdicts on those records (`fence_held`, `judge_settles`,
`redrive_refusal`, `fresh_events`, `placed`), the answers a verb returns (`enqueued`), the conversions
of a read row to a `fairq.types` value (`event_info`, `audit_entry`,
`schedule`) and the parameters of an audit row (`audit_row`, `AuditTrail`). Nothing here
runs SQL, names a driver or reads a clock; the decisions themselves stay in
`fairq.kernel.rules` and `fairq.kernel.policy`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from . import rules
from .._json import body_value, canonical
from ..errors import LeaseExpired, LeaseLost, RedriveRefused, StaleLease
from .policy import Backoff, Policy, decide, from_ms, own_budget, policy_json
from .records import NewEvent, NewSchedule, SettleItem
from ..types import AuditEntry, Enqueued, EventInfo, Misfire, Outcome, Schedule, Settled, State

__all__ = [
    "Held",
    "fence_held",
    "held_live",
    "Tally",
    "Judged",
    "judge_settles",
    "redrive_refusal",
    "StoredId",
    "fresh_events",
    "Placed",
    "ready_at",
    "placed",
    "enqueued",
    "event_info",
    "audit_entry",
    "schedule",
    "schedule_params",
    "audit_row",
    "AuditTrail",
]


# -- leases: settle, extend, redrive -------------------------------------------


class Held(NamedTuple):
    """An event row as a fence check sees it, with its head's rotation place."""

    event_id: str
    id: int
    flow_id: int | None
    seq: int
    state: str
    generation: int
    attempts: int
    lifetime_attempts: int
    lease_until_ms: int | None
    owner: str | None
    pass_: int | None
    turn: int | None
    reason: str | None
    max_attempts: int | None = None  # the event's own budget and backoff (None: the queue's)
    backoff: str | None = None


def fence_held(row: Held | None, event_id: str, generation: int, now_ms: int,
               settled: bool = False) -> StaleLease | LeaseExpired | None:
    """rules.fence on a row as read (None: no such event)."""
    if row is None:
        return rules.fence(event_id, generation, now_ms, state=None, stored_generation=None,
                           lease_until_ms=None, settled_in_batch=settled)
    return rules.fence(event_id, generation, now_ms, state=row.state, stored_generation=row.generation,
                       lease_until_ms=row.lease_until_ms, settled_in_batch=settled)


def held_live(row: Held | None, event_id: str, generation: int, now_ms: int) -> Held:
    """The row of a lease that may settle or extend at now_ms; raises the
    StaleLease or LeaseExpired fence_held gives otherwise."""
    lost = fence_held(row, event_id, generation, now_ms)
    if lost is not None:
        raise lost
    assert row is not None
    return row


class Tally(Protocol):
    """What a store's transaction counts: state moves and TOTALS."""

    def moved(self, before: str | None, after: str, n: int = 1) -> None: ...

    def happened(self, total: str, n: int = 1) -> None: ...


class Recorder(Tally, Protocol):
    """A store's transaction that counts and appends audit rows."""

    def record(self, event_id: str, action: str, reason: str | None, actor: str | None,
               generation: int | None, now_ms: int, detail: dict[str, Any]) -> None: ...


class Judged:
    """A settle batch judged: the answer for each item, in order, and the rows
    each kind of write takes (the store turns them into its statements'
    parameters), with the audit rows to append."""

    __slots__ = ("out", "acked", "retried", "released", "quarantined", "audits")

    def __init__(self) -> None:
        self.out: list[Settled | LeaseLost] = []
        self.acked: list[Held] = []
        self.retried: list[tuple[Held, int, str | None]] = []  # (row, next_at_ms, reason)
        self.released: list[Held] = []  # given back unused
        self.quarantined: list[tuple[Held, str | None]] = []  # (row, reason)
        self.audits: list[dict[str, Any]] = []

    def count(self, tx: Tally) -> None:
        """Record the batch's state moves and totals in `tx` (none for an empty kind)."""
        if self.acked:
            tx.moved("inflight", "acked", len(self.acked))
            tx.happened("acked", len(self.acked))
        if self.retried or self.released:
            tx.moved("inflight", "ready", len(self.retried) + len(self.released))
            tx.happened("retried", len(self.retried))
        if self.quarantined:
            tx.moved("inflight", "quarantined", len(self.quarantined))
            tx.happened("quarantined", len(self.quarantined))


def judge_settles(items: Sequence[SettleItem], held: Mapping[str, Held], *, now_ms: int,
                  max_attempts: int, backoff: Backoff) -> Judged:
    """Each settle of a batch fenced (a second settle of one event in the
    batch is stale) and decided (policy.decide), on the rows as read, each
    by its own budget and backoff where it stores them (policy.own_budget),
    else by max_attempts and backoff (the queue's)."""
    judged = Judged()
    settled: set[str] = set()
    for item in items:
        row = held.get(item.event_id)
        lost = fence_held(row, item.event_id, item.generation, now_ms, item.event_id in settled)
        if lost is not None:
            judged.out.append(lost)
            continue
        assert row is not None
        settled.add(item.event_id)
        budget, wait = own_budget(row.max_attempts, row.backoff, max_attempts, backoff)
        decision = decide(item.outcome, event_id=item.event_id, generation=row.generation,
                          attempts=row.attempts, max_attempts=budget, now_ms=now_ms,
                          delay=item.delay, backoff=wait)
        judged.out.append(Settled(item.event_id, decision.state, from_ms(decision.next_at_ms),
                                  decision.attempts))
        if decision.state is State.ACKED:
            judged.acked.append(row)
        elif item.outcome is Outcome.RELEASE:
            judged.released.append(row)
        elif decision.state is State.READY:
            assert decision.next_at_ms is not None
            judged.retried.append((row, decision.next_at_ms, item.reason))
            judged.audits.append(audit_row(item.event_id, "retry", item.reason, row.owner, row.generation,
                                           now_ms, {"attempts": row.attempts,
                                                    "next_at": from_ms(decision.next_at_ms)}))
        else:
            reason = item.reason or decision.quarantine_cause
            judged.quarantined.append((row, reason))
            judged.audits.append(audit_row(item.event_id, "quarantine", reason, row.owner, row.generation,
                                           now_ms, {"cause": decision.quarantine_cause,
                                                    "attempts": row.attempts,
                                                    "lifetime_attempts": row.lifetime_attempts}))
    return judged


def redrive_refusal(row: Held | None, event_id: str, expected_generation: int) -> RedriveRefused | None:
    """Why a redrive of this row is refused (None: it may go on): only a
    quarantined event at the generation the caller saw gets a new round."""
    if row is None:
        return RedriveRefused(event_id, f"event {event_id!r} does not exist")
    if row.state != "quarantined":
        return RedriveRefused(event_id, f"event {event_id!r} is {row.state}, not quarantined")
    if row.generation != expected_generation:
        return RedriveRefused(
            event_id, f"event {event_id!r} is at generation {row.generation}, not {expected_generation}")
    return None


def redrive_each(tx: Recorder, items: Sequence[tuple[str, int]], rows: dict[str, Held],
                 write: Callable[[Held, int], None], *, reason: str, actor: str | None,
                 now_ms: int) -> list[int | RedriveRefused]:
    """Judge each (event_id, expected_generation) against the rows as read
    (all locked before the first is judged, in the store's one lock order)
    and write(row, new_generation) the ones that may go on, each counted and
    audited (the audit row keeps the reason it replaces); each slot is the
    new generation or the refusal, which wrote nothing. An id named twice is
    judged the second time as the first left it."""
    results: list[int | RedriveRefused] = []
    for event_id, expected in items:
        row = rows.get(event_id)
        refused = redrive_refusal(row, event_id, expected)
        if refused is not None or row is None:
            results.append(refused or RedriveRefused(event_id, f"event {event_id!r} does not exist"))
            continue
        generation = row.generation + 1
        try:
            write(row, generation)
        except RedriveRefused as exc:  # the store's compare-and-set found it changed
            results.append(exc)
            continue
        tx.moved("quarantined", "ready")
        tx.happened("redriven")
        tx.record(event_id, "redrive", reason, actor, generation, now_ms,
                  {"replaced_reason": row.reason, "attempts": row.attempts,
                   "lifetime_attempts": row.lifetime_attempts})
        rows[event_id] = row._replace(state="ready", generation=generation, attempts=0, reason=None)
        results.append(generation)
    return results


# -- enqueue -------------------------------------------------------------------


class StoredId(NamedTuple):
    """An event id already stored: its flow, its seq and its body (for a
    tombstone, the body's hash, rules.body_hash)."""

    event_id: str
    flow: str | None
    seq: int
    body: str | bytes


def fresh_events(items: Sequence[NewEvent], stored: Mapping[str, StoredId],
                 kinds: Mapping[str, str | None] | None = None) -> dict[str, NewEvent]:
    """The events to insert, by id: each new id once. A repeat of a stored
    id, or of an earlier item in the batch, must match it (rules.check_repeat
    raises Conflict otherwise, before anything is written), and name the
    same kind (rules.check_repeat_kind) as the stored event (`kinds`: each
    stored event's kind; a tombstone keeps none) or the earlier item."""
    fresh: dict[str, NewEvent] = {}
    for item in items:
        if item.event_id in stored:
            found = stored[item.event_id]
            rules.check_repeat(item.event_id, item.flow, item.body, stored_flow=found.flow, stored_body=found.body)
            if kinds is not None and item.event_id in kinds:
                rules.check_repeat_kind(item.event_id, item.kind, kinds[item.event_id])
        elif item.event_id in fresh:
            earlier = fresh[item.event_id]
            rules.check_repeat(item.event_id, item.flow, item.body, stored_flow=earlier.flow,
                               stored_body=earlier.body)
            rules.check_repeat_kind(item.event_id, item.kind, earlier.kind)
        else:
            fresh[item.event_id] = item
    return fresh


class Placed(NamedTuple):
    """Where a new event goes: its flow (None: a flow of its own), its seq,
    whether it becomes its flow's head, and when it is ready."""

    item: NewEvent
    flow_id: int | None
    seq: int
    head: bool
    next_at_ms: int


def ready_at(item: NewEvent, now_ms: int) -> int:
    """When a new event is ready: its delay after now_ms, or its own time (a schedule's slot)."""
    return now_ms + item.delay_ms if item.at_ms is None else item.at_ms


def placed(items: Sequence[NewEvent], flows: Mapping[str, list[Any]], now_ms: int) -> Iterator[Placed]:
    """Each new event's place, in batch order. flows: for each named flow of
    the batch, [flow_id, its first new seq, whether it has a head already];
    advanced as the batch's events take their seqs, so an event that finds
    its flow idle becomes its head and the later ones queue behind it."""
    for item in items:
        next_at = ready_at(item, now_ms)
        if item.flow is None:
            yield Placed(item, None, 1, True, next_at)
            continue
        slot = flows[item.flow]
        yield Placed(item, slot[0], slot[1], not slot[2], next_at)
        slot[1] += 1
        slot[2] = True


def enqueued(items: Sequence[NewEvent], stored: Mapping[str, StoredId], seqs: Mapping[str, int]) -> list[Enqueued]:
    """Each item's answer, in order: created for the first item of a new id
    (its seq in `seqs`), not created for a repeat."""
    out = []
    created: set[str] = set()
    for item in items:
        if item.event_id in seqs and item.event_id not in created:
            created.add(item.event_id)
            out.append(Enqueued(item.event_id, item.flow, seqs[item.event_id], True))
        else:
            seq = stored[item.event_id].seq if item.event_id in stored else seqs[item.event_id]
            out.append(Enqueued(item.event_id, item.flow, int(seq), False))
    return out


# -- read rows as values -------------------------------------------------------


def _ms(value: Any) -> float | None:
    """A stored millisecond time (or None) in seconds."""
    return from_ms(None if value is None else int(value))


def event_info(row: Sequence[Any]) -> EventInfo:
    """An event read as (event_id, flow name, seq, body, state, generation,
    attempts, lifetime_attempts, next_at_ms, lease_until_ms, owner, reason,
    created_ms, due_ms, first_claim_ms, settled_ms, kind, max_attempts,
    timeout_ms)."""
    return EventInfo(
        event_id=row[0], flow=row[1], seq=int(row[2]), body=body_value(row[3]), state=State(row[4]),
        generation=int(row[5]), attempts=int(row[6]), lifetime_attempts=int(row[7]), next_at=_ms(row[8]),
        lease_until=_ms(row[9]), owner=row[10], reason=row[11], created_at=int(row[12]) / 1000,
        due_at=int(row[13]) / 1000, first_claimed_at=_ms(row[14]), settled_at=_ms(row[15]),
        kind=row[16], max_attempts=None if row[17] is None else int(row[17]), timeout=_ms(row[18]),
    )


def audit_entry(row: Sequence[Any]) -> AuditEntry:
    """An audit row read as (event_id, action, reason, actor, generation, at_ms, detail, id)."""
    return AuditEntry(row[0], row[1], row[2], row[3], None if row[4] is None else int(row[4]),
                      int(row[5]) / 1000, json.loads(row[6]), int(row[7]))


def schedule(row: Sequence[Any]) -> Schedule:
    """A schedule read as (name, every_ms, cron, tz, body, flow, start_ms,
    misfire, grace_ms, paused, last_slot_ms, next_slot_ms)."""
    return Schedule(
        name=row[0], every=_ms(row[1]), cron=row[2], tz=row[3], body=body_value(row[4]), flow=row[5],
        start=int(row[6]) / 1000, misfire=Misfire(row[7]), grace=_ms(row[8]), paused=bool(row[9]),
        last_slot=_ms(row[10]), next_slot=_ms(row[11]),
    )


# -- rows written --------------------------------------------------------------


def schedule_params(new: NewSchedule) -> dict[str, Any]:
    """The parameters of a new schedule's row, by column name."""
    return {"name": new.name, "every_ms": new.every_ms, "cron": new.cron, "tz": new.tz, "body": new.body,
            "flow": new.flow, "start_ms": new.start_ms, "misfire": new.misfire.value,
            "grace_ms": new.grace_ms, "next_slot_ms": new.next_slot_ms}


def audit_row(event_id: str, action: str, reason: str | None, actor: str | None,
              generation: int | None, now_ms: int, detail: dict[str, Any]) -> dict[str, Any]:
    """The parameters of one audit row, by column name."""
    return {"event_id": event_id, "action": action, "reason": reason, "actor": actor,
            "generation": generation, "at_ms": now_ms, "detail": canonical(detail)}


class AuditTrail:
    """What a store's write transaction appends to the audit log, through
    the one statement it provides (append_audit)."""

    __slots__ = ()

    def append_audit(self, rows: list[dict[str, Any]]) -> None:
        """Append audit rows made by audit_row."""
        raise NotImplementedError

    def record(self, event_id: str, action: str, reason: str | None, actor: str | None,
               generation: int | None, now_ms: int, detail: dict[str, Any]) -> None:
        """Append one audit row."""
        self.append_audit([audit_row(event_id, action, reason, actor, generation, now_ms, detail)])

    def record_policy_change(self, before: Policy, after: Policy, *, reason: str | None, actor: str | None,
                             now_ms: int) -> None:
        """Audit a policy change ("policy_set", the policy before and after);
        nothing when the stored version did not move."""
        if after.version != before.version:
            self.record("", "policy_set", reason, actor, None, now_ms,
                        {"from": policy_json(before), "to": policy_json(after)})

    def append_misfires(self, misfires: Sequence[tuple[str, str, dict[str, Any]]], now_ms: int) -> None:
        """Record schedule slots that did not become instances: (instance id, reason, detail)."""
        self.append_audit([audit_row(event_id, "misfire", reason, None, None, now_ms, detail)
                           for event_id, reason, detail in misfires])
