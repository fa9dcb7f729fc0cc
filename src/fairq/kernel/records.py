"""The validated requests and stored shapes the facade, the kernel and the stores pass
to each other: plain data, no behaviour (fairq.stores.backend's protocols take them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..types import EventInfo, Misfire, Outcome, State

__all__ = ["NewEvent", "SettleItem", "Pause", "FlowHead", "NewSchedule", "Advance", "StoredResult"]


class NewEvent(NamedTuple):
    """A validated enqueue request: canonical body text, and when it is due:
    `delay_ms` after the call's time, or at `at_ms` if given (a schedule's
    slot, which may already have passed)."""

    event_id: str
    flow: str | None
    body: str
    delay_ms: int
    at_ms: int | None = None
    #: The tenant the event's flow belongs to (None: the flow is its own tenant).
    tenant: str | None = None
    #: The task name the event carries (None: none).
    kind: str | None = None
    #: The event's own retry budget and backoff (policy.backoff_text), and
    #: how long its handler may run (ms); None: the queue's policy, the
    #: worker's own timeout.
    max_attempts: int | None = None
    timeout_ms: int | None = None
    backoff: str | None = None

    @property
    def tasked(self) -> bool:
        """Does the event carry a kind or a policy of its own (columns a store
        writes only when some event of a batch has them)?"""
        return not (self.kind is None and self.max_attempts is None and self.timeout_ms is None
                    and self.backoff is None)


class SettleItem(NamedTuple):
    """A validated settle request for one lease."""

    event_id: str
    generation: int
    outcome: Outcome
    reason: str | None
    delay: float | None
    #: The attempts the lease was handed with, when the caller's lease says
    #: (a retry's jitter draw is made for them); a hint a store checks
    #: against the stored attempts, never trusts.
    attempts: int | None = None


class Pause(NamedTuple):
    """A paused flow's pause as stored: why, by whom, when (the queue's clock)."""

    reason: str | None
    actor: str | None
    at_ms: int


class FlowHead(NamedTuple):
    """A named flow as stored: its weight, the seq its next event gets, and its
    head (the lowest unacked seq; None when every event is acked)."""

    name: str
    weight: int
    next_seq: int
    head: EventInfo | None
    tenant: str | None = None  # the tenant the flow belongs to (None: its own)
    pause: Pause | None = None  # set while the flow is paused


@dataclass(frozen=True)
class NewSchedule:
    """A validated schedules.add request: canonical body text, times in ms."""

    name: str
    every_ms: int | None
    cron: str | None
    tz: str
    body: str
    flow: str | None
    start_ms: int
    misfire: Misfire
    grace_ms: int | None
    next_slot_ms: int


@dataclass(frozen=True)
class Advance:
    """Where a tick leaves one schedule: the newest slot it decided and the next one."""

    name: str
    last_slot_ms: int
    next_slot_ms: int | None


class StoredResult(NamedTuple):
    """An event's state and reason, and its result's canonical JSON text (None:
    not acked, or acked without a result), read in one snapshot."""

    state: State
    reason: str | None
    body: str | None
