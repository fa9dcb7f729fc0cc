"""What every store says about a discard: whether an event may be discarded,
and the audit row's detail. Nothing here runs SQL or reads a clock."""

from __future__ import annotations

from typing import Any

from ..errors import RedriveRefused
from .rows import Held


def discard_refusal(row: Held | None, event_id: str, expected_generation: int) -> RedriveRefused | None:
    """Why a discard of this row is refused (None: it may go on): only a
    ready or quarantined event at the generation the caller saw."""
    if row is None:
        return RedriveRefused(event_id, f"no event {event_id!r}")
    if row.generation != expected_generation:
        return RedriveRefused(
            event_id, f"event {event_id!r} is at generation {row.generation}, not {expected_generation}")
    if row.state == "inflight":
        until = "?" if row.lease_until_ms is None else f"{row.lease_until_ms / 1000:g}"
        return RedriveRefused(
            event_id, f"event {event_id!r} is inflight (leased to {row.owner} until {until}): it must be "
                      "settled, or its lease must end, before it can be discarded")
    if row.state == "acked":
        return RedriveRefused(event_id, f"event {event_id!r} is acked: it is done, there is nothing to discard")
    if row.state == "discarded":
        return RedriveRefused(event_id, f"event {event_id!r} is already discarded")
    return None


def discard_detail(row: Held) -> dict[str, Any]:
    """The 'discard' audit row's detail: the state before, the attempts, and
    for a quarantined event the reason the discard replaces."""
    detail: dict[str, Any] = {"state": row.state, "attempts": row.attempts}
    if row.state == "quarantined":
        detail["replaced_reason"] = row.reason
    return detail
