"""What every store says about a discard: whether an event may be discarded,
and the audit row's detail. Nothing here runs SQL or reads a clock."""

from __future__ import annotations

from typing import Any

from ..errors import RedriveRefused
from .rows import Held


def discard_refusal(event_id: str, expected_generation: int, *, state: str | None, generation: int | None,
                    owner: str | None, lease_until_ms: int | None) -> RedriveRefused | None:
    """Why a discard of this event, as stored, is refused (None: it may go
    on): only a ready or quarantined event at the generation the caller saw.
    state None: no such event. A lease is named before the generation: a
    discard that waited for a claim hears "inflight", which says what to do.
    Both stores word their refusals here."""
    if state is None:
        return RedriveRefused(event_id, f"no event {event_id!r}")
    if state == "inflight":
        until = "?" if lease_until_ms is None else f"{lease_until_ms / 1000:g}"
        return RedriveRefused(
            event_id, f"event {event_id!r} is inflight (leased to {owner or 'a worker'} until {until}): it must be "
                      "settled, or its lease must end, before it can be discarded")
    if generation != expected_generation:
        return RedriveRefused(
            event_id, f"event {event_id!r} is at generation {generation}, not {expected_generation}")
    if state == "acked":
        return RedriveRefused(event_id, f"event {event_id!r} is acked: it is done, there is nothing to discard")
    if state == "discarded":
        return RedriveRefused(event_id, f"event {event_id!r} is already discarded")
    return None


def discard_detail(row: Held) -> dict[str, Any]:
    """The 'discard' audit row's detail: the state before, the attempts, and
    for a quarantined event the reason the discard replaces."""
    detail: dict[str, Any] = {"state": row.state, "attempts": row.attempts}
    if row.state == "quarantined":
        detail["replaced_reason"] = row.reason
    return detail
