"""Wake-ups for idle workers on PostgreSQL: one LISTEN connection per Queue.

A transaction of the PostgreSQL store that makes a head claimable now sends
NOTIFY on the ready channel. A Listener keeps one dedicated autocommit
connection that LISTENs on it, read by one daemon thread; every thread of
the process that waits for work (Queue.wait_for_work) sleeps on a condition
that the thread wakes on each notification. Each waiting thread remembers
the last notification it saw, so one that arrives while the thread is busy
claiming is not lost: its next wait returns at once. A notification says
how many heads its transaction made claimable (its payload): of the threads
asleep when it arrives, only that many wake, the longest asleep first, and
the others sleep on as if they had seen it (their process has threads
enough on the way for that work); an empty payload wakes them all. A transaction that
only leaves work waiting until a later time notifies the due channel with
that time: a waiter that would sleep past it (or heard it while busy)
sleeps until then instead.

When the connection cannot be made or breaks, waits report that they did not
listen (the caller polls, backing off) and the thread reconnects, backing off
up to RECONNECT_MAX seconds; once listening again it wakes every waiter,
since work may have arrived meanwhile. Nothing here reads or writes queue
rows, and nothing here decides what is claimable: the store does.

A NOTIFY makes every notifying commit of the database take turns, so
the one-statement verbs send one only while some worker may be asleep
(fairq_asleep in migrations/verbs.sql). The listening connection marks its process
as one that may sleep (_MARK: a session-level advisory lock held shared)
from a wait that finds it unmarked until LINGER seconds after its waits
have ended; marking passes a barrier (_BARRIER: a second lock taken
exclusive once) that waits for the transactions that checked before the
mark to commit.
Work those transactions made claimable was not announced: a wait that had
to mark first (or any wait of a thread whose last look for work came
before the current mark) returns at once, so its caller looks again.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from . import DUE_CHANNEL, READY_CHANNEL
from .listen_thread import READ_SLICE, ListenThread

log = logging.getLogger("fairq")

#: Seconds a wait blocks at a time while checking its stop event.
STOP_SLICE = 0.05
#: Due times kept for waiters that have not looked yet; one that missed more looks again.
DUE_KEPT = 64
#: Seconds a process stays marked as one that may sleep after its last wait ended.
LINGER = 1.0
#: The mark of a process that may sleep, held shared by its listening connection
#: (fairq_asleep in migrations/verbs.sql checks it).
_MARK = "SELECT pg_advisory_lock_shared(26228, 0)"
#: The barrier: every transaction that checked for sleepers before the mark has ended.
_BARRIER = "SELECT pg_advisory_lock(26228, 1), pg_advisory_unlock(26228, 1)"
#: No longer a process that may sleep.
_UNMARK = "SELECT pg_advisory_unlock_shared(26228, 0)"


class Listener(ListenThread):
    """LISTEN on the ready channel over its own connection; wait() sleeps until a
    notification, a deadline, or a stop.

    connect() returns a new autocommit connection (a psycopg Connection).
    The connection is opened by the reading thread, started on the first
    wait(); close() ends the thread and closes the connection.
    """

    def __init__(self, connect: Callable[[], Any], *, channel: str = READY_CHANNEL,
                 due_channel: str = DUE_CHANNEL, due: Callable[[], int | None] = lambda: None) -> None:
        """due(): when the next waiting head becomes claimable (earliest_ready_ms)."""
        super().__init__()
        self._connect = connect
        self.earliest_ready_ms = due
        self._channel = channel
        self._due_channel = due_channel
        self._count = 0  # notifications (and reconnections) seen so far
        self._due_count = 0  # due times heard so far
        self._dues: collections.deque[tuple[int, int]] = collections.deque(maxlen=DUE_KEPT)  # (count, ms)
        self._seen = threading.local()  # per waiting thread: the count when its last wait ended
        self._marks = 0  # how many times the process was marked as one that may sleep
        self._marked = False  # marked now (the lock is held)
        self._waiting = 0  # threads inside wait()
        self._sleepers: collections.deque[list[int]] = collections.deque()  # [seen] of each asleep, first asleep first
        self._last_wait = 0.0  # monotonic time the last wait ended

    @property
    def listening(self) -> bool:
        """True while the connection LISTENs (a notification would wake a waiter)."""
        return self._listening

    def wait(self, timeout: float, stop: threading.Event | None = None,
             until: Callable[[int], float] | None = None) -> bool:
        """Sleep up to `timeout` seconds, returning early on a notification this
        thread has not seen yet, or once `stop` is set. until(ms): seconds from
        now until a due time heard (ms of the queue's clock); the wait then
        ends by that time if it is earlier. A wait of a thread that last looked
        for work before the process was marked as one that may sleep marks
        it and returns at once: the caller looks again.

        Returns True when the whole wait was spent listening: a longer wait
        would not have missed new work. False when the connection is not up
        (the caller should poll rather than sleep long).
        """
        self._start()
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            seen = getattr(self._seen, "count", None)
            if seen is None:
                seen = self._count
            due_seen = getattr(self._seen, "due", None)
            if due_seen is None:
                due_seen = self._due_count
            listened = self._listening
            if listened and not (self._marked and getattr(self._seen, "mark", None) == self._marks):
                # Work committed since this thread last looked may be unannounced: mark, look again.
                self._waiting += 1
                while not (self._marked or not self._listening or self._closed
                           or (stop is not None and stop.is_set())):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, STOP_SLICE))
                return self._end_wait(self._marked and self._listening)
            self._waiting += 1
            asleep = [seen]  # a notice that does not wake this thread moves it on
            self._sleepers.append(asleep)
            try:
                while asleep[0] == self._count and not self._closed and not (stop is not None and stop.is_set()):
                    if until is not None and self._due_count != due_seen:
                        deadline = min(deadline, time.monotonic() + self._seconds_to_due(due_seen, until))
                        due_seen = self._due_count
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, STOP_SLICE) if stop is not None else left)
                    listened = listened and self._listening
            finally:
                self._sleepers.remove(asleep)
            self._seen.due = due_seen if until is not None else self._due_count
            return self._end_wait(listened and self._listening)

    def _end_wait(self, listened: bool) -> bool:
        """Leave wait() (the condition held): what this thread has seen, and when."""
        self._waiting -= 1
        self._last_wait = time.monotonic()
        self._seen.count = self._count
        self._seen.mark = self._marks if self._marked else None
        if not listened:
            self._seen.mark = None
        return listened

    def _seconds_to_due(self, due_seen: int, until: Callable[[int], float]) -> float:
        """Seconds until the earliest due time heard after the waiter's `due_seen`th (0 if it missed some)."""
        fresh = [ms for count, ms in self._dues if count > due_seen]
        if len(fresh) < self._due_count - due_seen:
            return 0.0  # some were dropped before this waiter looked: end the wait and look again
        return max(0.0, min(until(ms) for ms in fresh))

    # -- the reading thread (ListenThread runs it) --------------------------------

    def _listen(self) -> None:
        """Connect, LISTEN, then count notifications until closed or the connection fails."""
        conn = self._connect()
        self._conn = conn
        # The channels are fixed identifiers of fairq's; LISTEN cannot take a parameter.
        conn.execute("LISTEN " + self._channel)
        # A barrier that does not end (a transaction stopped after its check) counts as a lost connection.
        conn.execute("SET lock_timeout = '5s'")
        conn.execute("LISTEN " + self._due_channel)
        with self._cond:
            self._listening = True
            self._count += 1  # work may have come while no one listened: every waiter looks again
            self._cond.notify_all()
        log.debug("listen.ready channel=%s", self._channel)
        while not self._closed:
            got = None
            for got in conn.notifies(timeout=READ_SLICE):
                break  # wake the waiters now; the next read collects any others
            if got is not None:
                self._heard(got.channel, got.payload)
            elif conn.closed:
                raise ConnectionError("the listening connection closed")
            self._keep_mark(conn)

    def _keep_mark(self, conn: Any) -> None:
        """Mark the process as one that may sleep when a waiter needs it; unmark it
        LINGER seconds after the last wait ended."""
        with self._cond:
            mark = self._waiting > 0 and not self._marked
            unmark = (self._marked and self._waiting == 0
                      and time.monotonic() - self._last_wait > LINGER)
            if unmark:
                self._marked = False  # from now on a wait marks again first
        if unmark:
            conn.execute(_UNMARK)
        if mark:
            conn.execute(_MARK)
            conn.execute(_BARRIER)
            with self._cond:
                self._marked = True
                self._marks += 1
                self._cond.notify_all()

    def _heard(self, channel: str, payload: str) -> None:
        """Wake the waiters: for new work, or with a due time they may sleep to."""
        with self._cond:
            if channel == self._due_channel:
                try:
                    due_ms = int(payload)
                except ValueError:
                    return  # not fairq's notice
                self._due_count += 1
                self._dues.append((self._due_count, due_ms))
            else:
                self._count += 1
                self._pass_over(payload)
            self._cond.notify_all()

    def _pass_over(self, payload: str) -> None:
        """Of the threads asleep, wake as many as the notice's payload counts (the
        longest asleep first); the others take it as seen and sleep on."""
        try:
            wake = int(payload)
        except ValueError:
            return  # not counted: every one wakes
        for asleep in self._sleepers:
            if asleep[0] == self._count - 1:  # still asleep (not woken by an earlier notice)
                if wake > 0:
                    wake -= 1
                else:
                    asleep[0] = self._count

    def _drop(self) -> None:
        with self._cond:
            self._marked = False  # the lock ends with the connection
        super()._drop()


def connector(url: str) -> Callable[[], Any]:
    """A function that opens a new autocommit connection to `url` for listening
    (its fairq_* parameters taken out, fairq's connect timeout unless it has one)."""
    import psycopg  # the postgres extra; the store that led here imported it already

    from .url import parse

    target = parse(url)

    def connect() -> Any:
        return psycopg.connect(target.conninfo, autocommit=True, **target.connect_args())

    return connect
