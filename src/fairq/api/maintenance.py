"""The Queue's maintenance verbs: purge old acked events, reset a clock set ahead.

QueueMaintenance is a base class of fairq.Queue (on QueueBase, fairq.api.base).
Neither verb is on the hot path: purge pages through the event table, a reset
scans it. Each runs in write transactions of the store (fairq.stores.backend.WriteTxn) and logs what it did.
"""

from __future__ import annotations

import logging

from .. import _validate as v
from ..kernel.policy import to_ms
from ..limits import DEDUP_WINDOW, MAX_BATCH
from ..types import ClockReset, Purged
from .base import QueueBase
from .requests import required_reason

log = logging.getLogger("fairq")


class QueueMaintenance(QueueBase):
    """The maintenance verbs of fairq.Queue: reset_clock, purge."""

    def reset_clock(self, *, reason: str, actor: str | None = None, to: float | None = None) -> ClockReset:
        """Move the stored clock back to the clock's reading now (or to `to`),
        after a call at a mistaken future time; audited (action "clock_reset").

        Every lease end and ready time (delay, backoff) beyond the new clock
        moves back by as much as the clock does, never before it, so nothing
        waits for the real clock to catch up; only an event never claimed and
        enqueued before the new clock keeps its ready time (its delay was
        measured from a true clock). A holder whose lease now ends
        earlier is still fenced by its generation. Returns what moved; when
        the stored clock is not ahead, nothing changes and no row is written.
        """
        reason = required_reason(reason)
        actor = v.optional_identifier(actor, "actor")
        to_ms_ = self._requested(to, "to")[0]
        with self._store.transaction("reset_clock") as tx:
            done = tx.reset_clock(to_ms_, reason=reason, actor=actor)
        if done.after < done.before:
            log.warning("clock reset from %s to %s by %s: %d leases and %d ready times moved back (%s)",
                        done.before, done.after, actor, done.leases, done.waits, reason)
        return done

    def purge(
        self, *, acked_before: float, dedup_window: float | None = DEDUP_WINDOW,
        now: float | None = None, chunk: int = 1000,
    ) -> Purged:
        """Remove acked events settled before `acked_before`, keeping a tombstone of each.

        A tombstone (id, flow, seq, body hash) makes a re-enqueue of the id
        answer created=False or Conflict as before. Tombstones of events
        acked more than `dedup_window` seconds before `now` are dropped
        (None: kept forever); after that the id may name a new event.
        Ready, inflight and quarantined events are never touched.

        Maintenance, not a hot-path verb: it pages through the whole event
        table by row id, one transaction per `chunk` rows, so writers wait at
        most one chunk. Stopped halfway, it leaves a consistent queue; run it
        again to finish.
        """
        acked_before_ms = to_ms(v.seconds(acked_before, "acked_before"))
        window_ms = None if dedup_window is None else to_ms(v.seconds(dedup_window, "dedup_window"))
        chunk = v.count(chunk, "chunk", low=1, high=MAX_BATCH)
        requested = self._requested(now)
        events = dropped = 0
        cursor: int | None = 0
        while cursor is not None:
            with self._store.transaction("purge") as tx:
                # The first chunk checks an explicit time; later ones run at it or after.
                requested = (tx.now(*requested), False)
                n, cursor = tx.purge_acked(cursor, chunk=chunk, acked_before_ms=acked_before_ms)
            events += n
        while window_ms is not None:
            with self._store.transaction("purge") as tx:
                requested = (tx.now(*requested), False)
                n = tx.drop_tombstones(requested[0] - window_ms, limit=chunk)
            dropped += n
            if n < chunk:
                break
        if events or dropped:
            log.info("purge events=%d tombstones_dropped=%d", events, dropped)
        return Purged(events, dropped)
