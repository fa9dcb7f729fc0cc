"""The Queue's periodic schedules: q.schedules, and tick, which turns due slots into events.

QueueScheduling is a base class of fairq.Queue (on QueueBase, fairq.api.base).
fairq.schedules decides which slots exist and what becomes of them; this
module hands it the store, the queue's clock and body limit, and runs a tick
in one write transaction.
"""

from __future__ import annotations

from .. import _validate as v
from ..kernel.policy import to_ms
from ..schedules import Schedules, expand_due
from ..types import Enqueued
from .base import QueueBase


class QueueScheduling(QueueBase):
    """The schedule verbs of fairq.Queue: schedules, tick."""

    @property
    def schedules(self) -> Schedules:
        """The periodic schedules kept in this file: add, get, list, remove, pause, resume."""
        return Schedules(self._store, self._requested, self.max_body_bytes)

    def tick(self, *, now: float | None = None, ahead: float = 0.0) -> list[Enqueued]:
        """Turn every due slot of every unpaused schedule into an instance, idempotently.

        Each schedule resumes from its stored position; slots missed while
        nothing ticked are reconciled by its misfire policy, and each slot
        not turned into an instance is an audit row with action "misfire".
        ahead: also expand slots up to this many seconds in the future; their
        instances become claimable at their slot. Returns the instances.
        """
        ahead_ms = to_ms(v.seconds(ahead, "ahead"))
        requested = self._requested(now)
        with self._store.transaction("tick") as tx:
            return expand_due(tx, tx.now(*requested), ahead_ms)
