"""What a lease argument is, read the same way by Queue and Client.

A lease is known by its key, (event_id, generation): all that settle and
extend need from it. A settle_many item is a tuple (lease, outcome[, reason[,
delay[, result]]]). Both are checked here, before any transaction or request, so a
refusal (InvalidInput naming the field) writes nothing.
"""

from __future__ import annotations

import shlex
from typing import Any

from . import _validate as v
from .errors import InvalidInput
from .limits import MAX_COUNT

__all__ = ["lease_key", "lease_attempts", "settle_parts", "redrive_command", "discard_command"]


def lease_key(lease: Any, field: str) -> tuple[str, int]:
    """(event_id, generation): all that settle and extend need from a lease."""
    event_id = getattr(lease, "event_id", None)
    generation = getattr(lease, "generation", None)
    if event_id is None or generation is None:
        raise InvalidInput(field, f"must be a fairq.Lease, not {type(lease).__name__}")
    v.identifier(event_id, field + ".event_id")
    v.count(generation, field + ".generation", low=1, high=MAX_COUNT)
    return event_id, generation


def lease_attempts(lease: Any) -> int | None:
    """The attempts a lease was handed with, if it carries them (a fairq.Lease
    does); None for a lease known only by its key. A hint: the store checks
    it against the attempts stored."""
    attempts = getattr(lease, "attempts", None)
    if isinstance(attempts, int) and not isinstance(attempts, bool) and 0 <= attempts < 2**31:
        return attempts
    return None


def settle_parts(item: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(lease, outcome, reason, delay, result) of one settle_many item; absent parts are None."""
    if not isinstance(item, tuple) or len(item) not in (2, 3, 4, 5):
        raise InvalidInput("", "must be (lease, outcome), (lease, outcome, reason), "
                           "(lease, outcome, reason, delay) or (lease, \"ack\", None, None, result)")
    return item + (None,) * (5 - len(item))


def redrive_command(option: str, value: str, event_id: str, generation: int) -> str:
    """The fairq command line that redrives a quarantined head; `option` and
    `value` name the queue ("--db", a path, or "--url", a server)."""
    return (f"fairq {option} {shlex.quote(value)} redrive {shlex.quote(event_id)} "
            f"--expected-generation {generation} --reason '<why it is safe to run again>'")


def discard_command(option: str, value: str, event_id: str, generation: int) -> str:
    """The fairq command line that discards a quarantined head (settled for good on the
    record: its flow moves on); `option` and `value` name the queue as for redrive_command."""
    return (f"fairq {option} {shlex.quote(value)} discard {shlex.quote(event_id)} "
            f"--expected-generation {generation} --reason '<why it must never run>'")
