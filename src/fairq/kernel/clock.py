"""A reset of the stored clock, the same on every store: whether it moves,
and what it records.

A call at a mistaken future time (a wall clock that jumped ahead and was
corrected) leaves the stored clock ahead of the real one; since it never
goes back by itself, leases and backoffs would wait for the real clock to
catch up. A reset moves it back, with every lease end and ready time
beyond the new time (the store's statements, `move`). Nothing here runs
SQL or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..types import ClockReset
from .rows import Recorder

__all__ = ["Rewinder", "reset_clock"]


class Rewinder(Recorder, Protocol):
    """A store's write transaction as a clock reset uses it."""

    def stored_now(self) -> int: ...

    def rewind(self, to_ms: int) -> None: ...


def reset_clock(tx: Rewinder, to_ms: int, move: Callable[[int, int], tuple[int, int]], *, reason: str,
                actor: str | None) -> ClockReset:
    """Move the stored clock back to to_ms: move(to_ms, back_ms) moves every
    lease end and ready time beyond to_ms back by back_ms (never before
    to_ms) and says how many leases and waits it moved; the reset is
    audited. Nothing moves, and nothing is written, when the clock is not
    ahead of to_ms."""
    before = tx.stored_now()
    if to_ms >= before:
        return ClockReset(before / 1000, before / 1000, 0, 0)
    leases, waits = move(to_ms, before - to_ms)
    tx.rewind(to_ms)
    tx.record("", "clock_reset", reason, actor, None, to_ms,
              {"from": before / 1000, "to": to_ms / 1000, "leases": leases, "waits": waits})
    return ClockReset(before / 1000, to_ms / 1000, leases, waits)
