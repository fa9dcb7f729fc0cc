"""The SQL of a clock reset: move the stored clock back, and every lease end
and ready time beyond it with it.

A call at a mistaken future time (a wall clock that jumped ahead and was
corrected) leaves the stored clock ahead of the real one; since the stored
clock never goes back by itself, leases and backoffs would wait for the real
clock to catch up. ClockTxn runs inside a queue write transaction
(store.txn.TxnCore) and never commits. Maintenance, not the hot path:
it scans the event table.
"""

from __future__ import annotations

from ...types import ClockReset
from .txn import TxnCore


class ClockTxn:
    """The clock reset statements, bound to an open queue write transaction."""

    def __init__(self, tx: TxnCore) -> None:
        self._tx = tx
        self.connection = tx.connection

    def reset(self, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
        """Move the stored clock back to to_ms, and with it every time that lies
        beyond to_ms, by as much as the clock moves and never before to_ms.
        Writes nothing when the clock is not ahead of to_ms."""
        before = self._tx.stored_now()
        if to_ms >= before:
            return ClockReset(before / 1000, before / 1000, 0, 0)
        params = {"to_ms": to_ms, "back": before - to_ms}
        conn = self.connection
        # A lease beyond the new clock ends as much earlier as the clock moves
        # back, never before it; an inflight head's dispatch time is its lease
        # end. Generations are untouched: a holder whose lease now ends earlier
        # is still fenced by its generation once the event is claimed again.
        leases = conn.execute(
            "UPDATE event SET lease_until_ms = max(:to_ms, lease_until_ms - :back), "
            "dispatch_ms = max(:to_ms, lease_until_ms - :back) "
            "WHERE state = 'inflight' AND lease_until_ms > :to_ms",
            params,
        ).rowcount
        # Ready times (delay, backoff) beyond the new clock move back the same
        # way; a head's dispatch time follows (events behind a head have none),
        # and so does the due time of an event never claimed, which claim lag
        # counts from. A runnable head was due by the old clock, so it ends up
        # at the new clock at the latest: still due, still runnable. An event
        # never claimed and enqueued before the new clock was given its ready
        # time by a true clock (a long delay): it keeps it.
        waits = conn.execute(
            "UPDATE event SET next_at_ms = max(:to_ms, next_at_ms - :back), "
            "dispatch_ms = CASE WHEN dispatch_ms IS NULL THEN NULL ELSE max(:to_ms, next_at_ms - :back) END, "
            "due_ms = CASE WHEN first_claim_ms IS NULL AND due_ms > :to_ms "
            "THEN max(:to_ms, due_ms - :back) ELSE due_ms END "
            "WHERE state = 'ready' AND next_at_ms > :to_ms "
            "AND (first_claim_ms IS NOT NULL OR created_ms > :to_ms)",
            params,
        ).rowcount
        self._tx.rewind(to_ms)
        self._tx.record("", "clock_reset", reason, actor, None, to_ms,
                        {"from": before / 1000, "to": to_ms / 1000, "leases": leases, "waits": waits})
        return ClockReset(before / 1000, to_ms / 1000, leases, waits)
