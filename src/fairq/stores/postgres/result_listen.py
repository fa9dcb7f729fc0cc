"""Waits for events to end on PostgreSQL: one LISTEN connection per Queue, on
the result channel.

A wait registers first (a row in event_result_waiter, committed) and then looks
at the event (results.locked_result); a settle or discard of an event with
a waiter row notifies the result channel with the event's id at its commit,
and only then, so a settle of an event nobody waits for sends nothing. One
daemon thread reads the dedicated autocommit connection and counts the
notices of each event some wait of this process registered; a wait sleeps
on a condition until its event's count moves, the connection is made again
(notices may have been missed: every wait looks again), or its time is up.
While the connection is down, register() answers None and the caller polls.
Nothing here decides anything about an event: the caller reads it.
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import RESULT_CHANNEL, results
from .connection import PgDatabase
from .listen_thread import READ_SLICE, ListenThread


@dataclass
class Registered:
    """One wait's registration: its event, its row's token, the notices seen."""

    event_id: str
    token: str
    seen: int


class ResultListener(ListenThread):
    """LISTEN on the result channel over its own connection (fairq.stores.backend.ResultWaits)."""

    thread_name = "fairq-results"

    def __init__(self, connect: Callable[[], Any], db: PgDatabase) -> None:
        super().__init__()
        self._connect = connect
        self._db = db
        self._heard: collections.Counter[str] = collections.Counter()  # notices (and reconnections) per event
        self._waiting: collections.Counter[str] = collections.Counter()  # registered waits per event
        self._epoch = 0  # connections made so far: a new one may have missed notices

    def register(self, event_id: str) -> Registered | None:
        """Register a wait (its row committed); None while not listening (poll instead)."""
        self._start()
        with self._cond:
            if not self._listening:
                return None
            self._waiting[event_id] += 1
            seen = self._heard[event_id] + self._epoch
        token = uuid.uuid4().hex
        try:
            results.register(self._db, event_id, token)
        except BaseException:
            self._forget(event_id)
            raise
        return Registered(event_id, token, seen)

    def wait(self, token: object, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, less once the event was heard of (True)."""
        assert isinstance(token, Registered)
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                now = self._heard[token.event_id] + self._epoch
                if now != token.seen or self._closed or not self._listening:
                    token.seen = now
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)

    def unregister(self, token: object) -> None:
        assert isinstance(token, Registered)
        try:
            results.unregister(self._db, token.event_id, token.token)
        finally:
            self._forget(token.event_id)

    def _forget(self, event_id: str) -> None:
        with self._cond:
            self._waiting[event_id] -= 1
            if self._waiting[event_id] <= 0:
                del self._waiting[event_id]
                self._heard.pop(event_id, None)

    # -- the reading thread (ListenThread runs it) --------------------------------

    def _listen(self) -> None:
        """Connect, LISTEN, then count the notices of registered events until closed or the connection fails."""
        conn = self._conn = self._connect()
        # The channel is a fixed identifier of fairq's; LISTEN cannot take a parameter.
        conn.execute("LISTEN " + RESULT_CHANNEL)
        with self._cond:
            self._listening = True
            self._epoch += 1  # notices may have come while no one listened: every wait looks again
            self._cond.notify_all()
        while not self._closed:
            for got in conn.notifies(timeout=READ_SLICE):
                with self._cond:
                    if got.payload in self._waiting:
                        self._heard[got.payload] += 1
                        self._cond.notify_all()
            if conn.closed:
                raise ConnectionError("the listening connection closed")
