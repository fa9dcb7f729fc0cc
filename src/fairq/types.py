"""The values fairq hands back: frozen dataclasses and str-Enums.

Enum values are the spellings used in SQL, the CLI and JSON output. Times are
float seconds of the queue's clock. Nothing here touches a database.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .blocked import Blocked, TenantInfo

__all__ = [
    "State",
    "Outcome",
    "ACK",
    "RETRY",
    "FAIL",
    "Enqueued",
    "Lease",
    "Settled",
    "EventInfo",
    "AuditEntry",
    "Stats",
    "Receipt",
    "Misfire",
    "Schedule",
    "Blocked",
    "FlowInfo",
    "TenantInfo",
    "Purged",
    "UndecodableBody",
    "ClockReset",
]


class State(str, Enum):
    """Where an event is in its life: ready -> inflight -> acked | ready | quarantined;
    ready or quarantined -> discarded by an operator's decision (final, like acked)."""

    READY = "ready"
    INFLIGHT = "inflight"
    ACKED = "acked"
    QUARANTINED = "quarantined"
    DISCARDED = "discarded"

    def __str__(self) -> str:
        return self.value


class Outcome(str, Enum):
    """What a lease holder decided: ack (done), retry (again later), fail
    (quarantine), or release (give the lease back unused: the event is ready
    at once and this claim does not count against the retry budget)."""

    ACK = "ack"
    RETRY = "retry"
    FAIL = "fail"
    RELEASE = "release"

    def __str__(self) -> str:
        return self.value


ACK = Outcome.ACK
RETRY = Outcome.RETRY
FAIL = Outcome.FAIL


# Enqueued, Lease and Settled are made once per call of the verbs: their
# __init__ is written out, filling the instance's fields at once, where a
# frozen dataclass's generated one sets each through object.__setattr__
# (twice as slow). They are frozen all the same: setting a field raises.


@dataclass(frozen=True, init=False)
class Enqueued:
    """The stored event an enqueue refers to; created=False: it was already there, identical."""

    event_id: str
    flow: str | None
    seq: int
    created: bool

    def __init__(self, event_id: str, flow: str | None, seq: int, created: bool) -> None:
        self.__dict__.update(event_id=event_id, flow=flow, seq=seq, created=created)


@dataclass(frozen=True, init=False)
class Lease:
    """The time-limited, fenced right to handle one event.

    Settle and extend need `event_id` and `generation` back; the rest is for
    the handler. `lease_until` is in queue-clock seconds. `kind` is the name
    of the task the event was enqueued for (None: no kind); `timeout` the
    seconds a handler of it may run (None: the worker's own timeout).
    """

    event_id: str
    flow: str | None
    seq: int
    body: Any
    generation: int
    attempts: int
    lifetime_attempts: int
    owner: str | None
    lease_until: float
    kind: str | None = None
    timeout: float | None = None

    def __init__(self, event_id: str, flow: str | None, seq: int, body: Any, generation: int, attempts: int,
                 lifetime_attempts: int, owner: str | None, lease_until: float, kind: str | None = None,
                 timeout: float | None = None) -> None:
        self.__dict__.update(event_id=event_id, flow=flow, seq=seq, body=body, generation=generation,
                             attempts=attempts, lifetime_attempts=lifetime_attempts, owner=owner,
                             lease_until=lease_until, kind=kind, timeout=timeout)


@dataclass(frozen=True, init=False)
class Settled:
    """The state a settle left the event in; next_at is set when it will be retried."""

    event_id: str
    state: State
    next_at: float | None
    attempts: int

    def __init__(self, event_id: str, state: State, next_at: float | None, attempts: int) -> None:
        self.__dict__.update(event_id=event_id, state=state, next_at=next_at, attempts=attempts)


@dataclass(frozen=True)
class ClockReset:
    """What Queue.reset_clock did: the stored clock moved from `before` back to
    `after` (equal when it was not ahead: nothing changed). `leases` lease ends
    and `waits` ready times (next_at: delays, backoffs) that lay beyond
    `after` moved back by as much as the clock did, never before `after`."""

    before: float
    after: float
    leases: int
    waits: int


@dataclass(frozen=True)
class UndecodableBody:
    """Stands in for a stored body this process cannot decode, in EventInfo.body
    (get, events) or Lease.body: e.g. an integer of more digits than Python's
    int-digit limit allows, written by a fairq that did not refuse it. A claim
    that reaches such an event quarantines it (reason "undecodable_body")
    instead of leasing it. `text` is the stored JSON text, `problem` why it
    did not decode."""

    text: str
    problem: str


@dataclass(frozen=True)
class EventInfo:
    """Everything stored about one event (`body` is an UndecodableBody if this
    process cannot decode the stored text)."""

    event_id: str
    flow: str | None
    seq: int
    body: Any
    state: State
    generation: int
    attempts: int
    lifetime_attempts: int
    next_at: float | None
    lease_until: float | None
    owner: str | None
    reason: str | None
    created_at: float
    due_at: float
    first_claimed_at: float | None
    settled_at: float | None


@dataclass(frozen=True)
class AuditEntry:
    """One appended decision about an event: retry, quarantine, expired, redrive, misfire;
    or about the whole queue: clock_reset (event_id "").

    `detail` holds what else explains it, e.g. the quarantine reason a redrive
    replaced (`detail["replaced_reason"]`) and the attempt counts at the time.
    """

    event_id: str
    action: str
    reason: str | None
    actor: str | None
    generation: int | None
    at: float
    detail: dict[str, Any] = field(default_factory=dict)
    id: int = 0  # the row's place in the log, increasing: the next page starts after it (audit(after=id))


#: The names of Stats.totals, in the order they are shown.
TOTALS = ("enqueued", "claimed", "expired", "acked", "retried", "quarantined", "redriven", "discarded")


@dataclass(frozen=True)
class Stats:
    """A snapshot of the queue.

    counts: events in each state, every State value a key, zeros included.
    flows: flows with an unacked event (a quarantined head blocks its flow,
    so counts["quarantined"] is also the number of blocked flows).
    oldest_ready_age: seconds the longest-waiting claimable head has been
    claimable (0.0 when none). totals: what happened since the file was
    created: enqueued, claimed, expired (claims that found a dead holder's
    lease), acked, retried, quarantined, redriven, discarded. claim_lag_median and
    claim_lag_p99: seconds from an event's due time to its first claim, as the
    upper bound of the histogram bucket holding that quantile (None before
    any claim). claim_lag_buckets: (upper bound in seconds, count) per bucket,
    the last bound infinite. top_flows: (flow, unacked events) for the
    named flows with the largest backlog, largest first. now: when the
    snapshot was taken. totals["purged"]: acked events purge removed;
    tombstones: purged ids still remembered (see Queue.purge).
    claimable_now: heads a claim could take now (due, in a flow that is not
    paused, of a tenant no limit holds back); blocked_flows: flows whose
    head is quarantined or that are paused -- the events behind them are
    "ready" but wait for an operator.
    """

    counts: dict[str, int]
    flows: int
    oldest_ready_age: float
    now: float
    totals: dict[str, int] = field(default_factory=dict)
    claim_lag_median: float | None = None
    claim_lag_p99: float | None = None
    claim_lag_buckets: tuple[tuple[float, int], ...] = ()
    top_flows: tuple[tuple[str, int], ...] = ()
    tombstones: int = 0
    claimable_now: int = 0
    blocked_flows: int = 0


class Receipt(str, Enum):
    """What an Inbox did with a delivery; `.outcome` is what the sender should settle with."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    ID_CONFLICT = "id_conflict"
    SEQUENCE_CONFLICT = "sequence_conflict"
    GAP = "gap"

    @property
    def outcome(self) -> Outcome:
        """ack for accepted/duplicate, retry for a gap, fail for a conflict."""
        return _RECEIPT_OUTCOME[self]

    def __str__(self) -> str:
        return self.value


_RECEIPT_OUTCOME = {
    Receipt.ACCEPTED: Outcome.ACK,
    Receipt.DUPLICATE: Outcome.ACK,
    Receipt.GAP: Outcome.RETRY,
    Receipt.ID_CONFLICT: Outcome.FAIL,
    Receipt.SEQUENCE_CONFLICT: Outcome.FAIL,
}


class Misfire(str, Enum):
    """What a tick does with a schedule's slots that are already due when it finds them.

    all: every slot becomes an instance (catch up on everything missed).
    coalesce: only the newest due slot does; the older ones are misfires.
    skip: slots later than the schedule's grace are misfires, the rest run.
    """

    ALL = "all"
    COALESCE = "coalesce"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Schedule:
    """A periodic schedule, as stored.

    Exactly one of `every` (seconds between slots, counted from `start`) and
    `cron` (a 5-field expression read in time zone `tz`) is set. `flow` is
    the flow of its instances (by default the schedule's name, so runs never
    overlap), None when each instance is a flow of its own. `grace`: how late
    (seconds) a slot may be found and still run, under coalesce and skip.
    `last_slot`: the newest slot a tick has decided (None before the first);
    `next_slot`: the next one a tick will decide (None: no slot is left).
    Slots and start are queue-clock seconds (Unix time).
    """

    name: str
    every: float | None
    cron: str | None
    tz: str
    body: Any
    flow: str | None
    start: float
    misfire: Misfire
    grace: float | None
    paused: bool
    last_slot: float | None
    next_slot: float | None

    def instance_id(self, slot: float) -> str:
        """The event id of this schedule's instance for `slot`: "{name}@{UTC ISO-8601}"."""
        return slot_event_id(self.name, round(slot * 1000))


def slot_text(slot_ms: int) -> str:
    """A slot as a UTC ISO-8601 instant: 2026-03-29T01:00:00Z (milliseconds only when not zero)."""
    seconds, ms = divmod(slot_ms, 1000)
    text = (_EPOCH + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{ms:03d}Z" if ms else f"{text}Z"


def slot_event_id(name: str, slot_ms: int) -> str:
    """The instance id of a schedule's slot: "{name}@{slot_text}"."""
    return f"{name}@{slot_text(slot_ms)}"


_EPOCH = datetime.datetime(1970, 1, 1)


@dataclass(frozen=True)
class FlowInfo:
    """One named flow as Queue.flows lists it: its weight, its head (None when
    every event is acked), its backlog (unacked events, head included) and
    `blocked`, the answer why_blocked gives for it at the same moment."""

    name: str
    weight: int
    backlog: int
    head: EventInfo | None
    blocked: Blocked
    tenant: str | None = None  # the tenant the flow belongs to (None: the flow is its own tenant)
    paused: bool = False  # paused by an operator (blocked says by whom and why)


@dataclass(frozen=True)
class Purged:
    """What Queue.purge removed: acked events replaced by tombstones, and tombstones forgotten."""

    events: int
    tombstones_dropped: int
