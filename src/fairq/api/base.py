"""What every verb group of the Queue facade shares: the open store, the clock,
and the time a call asks for.

QueueBase is the one base of the facade's verb groups (reads, operators,
maintenance, configuration, waits, scheduling) and of fairq.Queue, which sets
these attributes when it opens the store. Nothing here opens, writes or reads
a database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..stores.backend import Store
from .requests import requested_time


class QueueBase:
    """The state the Queue's verb groups share, and the time a call runs at."""

    path: Any
    max_body_bytes: int
    max_clock_skew: float | None
    _store: Store
    _clock: Callable[[], float]
    _server_clock: bool

    def _requested(self, now: float | None, field: str = "now") -> tuple[int, bool]:
        """(milliseconds, explicit?) for a call's `now` argument (requests.requested_time):
        the clock's reading for None; an explicit time checked against the clock."""
        return requested_time(self._clock, self.max_clock_skew, now, field, server_clock=self._server_clock)
