"""What a read answers about what holds work back: why a flow is not moving
(Blocked) and a tenant with its limits as listed (TenantInfo). Plain
values; fairq.types re-exports them."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

__all__ = ["Blocked", "TenantInfo"]


@dataclass(frozen=True)
class Blocked:
    """Why a flow is not moving, in one answer (Queue.why_blocked; str() says it in a sentence).

    why is one of: "unknown" (no such flow), "empty" (every event acked),
    "ready" (the head is claimable now and waits only for its turn),
    "delayed" (the head's delay runs until `until`), "backing_off" (the head
    failed and is retried at `until`), "leased" (held by `owner` until
    `until`), "expired" (its holder's lease ended at `until`; the next claim
    takes it over), "quarantined" (blocked until an operator redrives it, to
    run it again, or discards it, to skip it on the record; `redrive` and
    `discard` are the commands, with the head's generation). event_id, seq,
    generation, attempts and reason describe the head; backlog counts the
    flow's unacked events, head included.
    """

    flow: str
    why: str
    now: float
    event_id: str | None = None
    seq: int | None = None
    until: float | None = None
    owner: str | None = None
    reason: str | None = None
    generation: int | None = None
    attempts: int | None = None
    backlog: int = 0
    redrive: str | None = None
    tenant: str | None = None
    actor: str | None = None
    discard: str | None = None

    def __str__(self) -> str:
        flow, head = f"flow {self.flow!r}", f"head {self.event_id} (seq {self.seq})"
        behind = f"; {self.backlog - 1} more wait behind it" if self.backlog > 1 else ""
        why = self.reason if self.reason is not None else "no reason given"
        if self.why == "unknown":
            return f"{flow} is unknown: no event was ever enqueued in it"
        if self.why == "empty":
            return f"{flow} is empty: every event in it is acked"
        if self.why == "ready":
            return f"{flow} is not blocked: {head} is claimable now and waits only for its turn{behind}"
        if self.why == "paused":
            by = "" if self.actor is None else f" by {self.actor}"
            head = "" if self.event_id is None else f"; {self.event_id} (seq {self.seq}) is its head{behind}"
            return (f"{flow} is paused{by} ({why}) since {self._at(self.until)}{head}. "
                    f"To let claims take it again: fairq resume {self.flow}")
        if self.why == "tenant_cap":
            until = "" if self.until is None else f" (the first of them ends at {self._at(self.until)})"
            return (f"{flow} waits for its tenant {self.tenant!r}: {head} is due, but the tenant has "
                    f"max_inflight events leased{until}; a settle frees a slot{behind}")
        if self.why == "tenant_rate":
            return (f"{flow} waits for its tenant {self.tenant!r}: {head} is due, but the tenant's rate "
                    f"limit allows its next claim at {self._at(self.until)}{behind}")
        if self.why == "quarantined":
            if self.discard is None:  # made without the discard command
                return f"{flow} is blocked: {head} is quarantined ({why}){behind}. To run it again: {self.redrive}"
            return (f"{flow} is blocked: {head} is quarantined ({why}){behind}. Two ways on. Run it again: "
                    f"{self.redrive}; or skip it on the record (it becomes discarded and the flow moves on): "
                    f"{self.discard}")
        at = self._at(self.until)
        if self.why == "delayed":
            return f"{flow} waits: {head} is delayed until {at}{behind}"
        if self.why == "backing_off":
            return (f"{flow} is backing off: {head} failed attempt {self.attempts} ({why}) "
                    f"and is retried at {at}{behind}")
        if self.why == "leased":
            return (f"{flow} is being handled: {head} is leased to {self.owner} until {at} "
                    f"(attempt {self.attempts}){behind}")
        return (f"{flow} waits for a claim: the lease of {self.owner} on {head} ended at {at}; "
                f"the next claim takes it over{behind}")

    def _at(self, t: float | None) -> str:
        """A queue-clock time as UTC ISO-8601, with how far it is from `now`."""
        assert t is not None
        stamp = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="milliseconds")
        gap = t - self.now
        relative = f"in {gap:.1f} s" if gap >= 0 else f"{-gap:.1f} s ago"
        return f"{stamp.replace('+00:00', 'Z')} ({relative})"


@dataclass(frozen=True)
class TenantInfo:
    """One tenant as Queue.tenants lists it: its settings, what it holds now,
    and whether a limit holds it back (all at the read's `now`).

    weight: claims per round of the tenant rotation; max_inflight: at most so
    many of its events leased at once (0: no limit); rate, burst: its token
    bucket, claims per second and claims at once (rate 0: no limit).
    inflight: its events leased now; ready: its events in state ready (due
    or not); flows: its named flows. tokens: whole tokens in its bucket now
    (None without a rate). limited_by: "max_inflight" or "rate" when that
    limit holds it back now, else None; until: for "rate" when the next token is
    there, for "max_inflight" the earliest end among its leases.
    """

    name: str
    weight: int
    max_inflight: int
    rate: int
    burst: int
    inflight: int
    ready: int
    flows: int
    tokens: float | None = None
    limited_by: str | None = None
    until: float | None = None
