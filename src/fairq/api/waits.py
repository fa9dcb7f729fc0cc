"""Queue.wait_for_work and Queue.reconnect: how a worker sleeps until there may be
work again, and how it gets a connection back after losing the server.

On a store that tells of new work (PostgreSQL: NOTIFY when a head becomes
claimable now, and the earliest time a waiting head becomes due), the wait
ends on that news, through one listening connection per Queue opened on the
first wait (Store.wakeups). On a store without wake-ups (SQLite) it is a plain
sleep, and the caller polls. QueueWaits is a base class of fairq.Queue (on
QueueBase, fairq.api.base). No SQL here, no queue rule, and no database named.
"""

from __future__ import annotations

import threading

from ..errors import InvalidInput
from ..stores.backend import Wakeups
from .base import QueueBase

#: The wait when a waiting head is due by this host's clock but was not claimable (the
#: server's clock may be behind this host's): look again this often, not in a busy loop.
RECHECK = 0.05
#: Past a due time, so that a claim made on waking finds the head due on the server too.
MARGIN = 0.002


class QueueWaits(QueueBase):
    """The wait_for_work and reconnect verbs of fairq.Queue."""

    _listener: Wakeups | None = None
    _waits_closed = False

    def wait_for_work(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Sleep up to `timeout` seconds, less when new work may be claimable or
        once `stop` (a threading.Event) is set.

        On PostgreSQL the wait ends when a transaction makes a head claimable
        now (LISTEN/NOTIFY over one connection of this Queue's own, opened on
        the first call) or when the earliest waiting event becomes due, one
        written during the wait included.
        Returns True when the whole wait was spent listening, so waiting
        longer would have missed nothing; False when it was a plain sleep
        (SQLite, or the listening connection is down), and the caller should
        poll.
        """
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise InvalidInput("timeout", f"must be a number of seconds >= 0, got {timeout!r}")
        listener = self._wakeups()
        if listener is None:
            if stop is None:
                threading.Event().wait(timeout)
            else:
                stop.wait(timeout)
            return False
        due_ms = listener.earliest_ready_ms()
        if due_ms is not None:
            # The due time is on the queue's clock, read here from this host's (on the server's
            # clock, hosts whose clocks are skewed wake that much early or late, never later
            # than the timeout).
            until = self._seconds_until(due_ms)
            timeout = min(timeout, until if until > MARGIN else RECHECK)
        listened: bool = listener.wait(timeout, stop, self._seconds_until)
        return listened

    def _seconds_until(self, due_ms: int) -> float:
        """Seconds from now (this host's clock) until a due time of the queue's clock, and a margin."""
        return due_ms / 1000.0 - self._clock() + MARGIN

    def reconnect(self) -> None:
        """Open a new connection to the queue's database in place of this Queue's
        own, now (after Unavailable: the server restarted or the connection was cut).

        Raises Unavailable (and keeps the old connection) while the server is
        still out of reach. Not needed to go on: the call after one that met a
        lost connection opens a new one itself (the call that met the loss
        raised Unavailable; nothing is repeated). fairq.Worker calls this when
        a round meets Unavailable, to learn that the server is back. On SQLite
        there is no connection to lose: nothing happens.
        """
        if not self._waits_closed:
            self._store.reconnect()

    def _wakeups(self) -> Wakeups | None:
        """This Queue's listener (started on first use), or None on a store without wake-ups."""
        if self._listener is None and not self._waits_closed:
            self._listener = self._store.wakeups()
        return self._listener

    def _close_waits(self) -> None:
        """Stop listening (Queue.close)."""
        self._waits_closed = True
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

