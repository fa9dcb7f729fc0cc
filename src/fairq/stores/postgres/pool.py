"""A small pool of a queue's connections: at most `size` at once, opened
when a call finds none idle, the most recently used handed out first.

A thread takes one connection for one call (a transaction or a read
snapshot) and gives it back when the call ends; a thread that finds every
connection in use waits for one. A connection given back lost, or not
idle, is closed and its place freed, so the next call opens a new one.
Knows nothing about SQL, sessions or errors: connection.py opens, checks
and closes the connections through the callables it is given.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

C = TypeVar("C")


class Pool(Generic[C]):
    """At most `size` connections: idle ones on a stack (last in, first out),
    the rest in use by one thread each."""

    def __init__(self, open_one: Callable[[], C], close_one: Callable[[C], None], size: int) -> None:
        if size < 1:
            raise ValueError("a pool holds at least one connection")
        self._open_one = open_one
        self._close_one = close_one
        self.size = size
        self._idle: list[C] = []
        self._opened = 0  # connections open or being opened: idle ones and those in use
        self._closed = False
        self._cond = threading.Condition()

    def take(self) -> C | None:
        """An idle connection, or a new one while fewer than `size` are open,
        else wait for one given back; None once the pool is closed. Whatever
        open_one() raises is raised, its place freed."""
        with self._cond:
            while not self._closed and not self._idle and self._opened >= self.size:
                self._cond.wait()
            if self._closed:
                return None
            if self._idle:
                return self._idle.pop()
            self._opened += 1  # this place is ours while the connection opens (outside the lock)
        try:
            return self._open_one()
        except BaseException:
            self._free(1)
            raise

    def give(self, conn: C, *, keep: bool) -> None:
        """Give back a taken connection: kept idle for the next call, or
        (keep=False, or the pool closed) closed and its place freed."""
        with self._cond:
            if keep and not self._closed:
                self._idle.append(conn)
                self._cond.notify()
                return
        self._discard([conn])

    def renew(self, fresh: C) -> None:
        """Close every idle connection and keep `fresh` (opened by the caller,
        outside the pool) in their place, if there is room for it."""
        with self._cond:
            stale, self._idle = self._idle, []
            self._opened -= len(stale)
            room = not self._closed and self._opened < self.size
            if room:
                self._idle.append(fresh)
                self._opened += 1
                self._cond.notify()
        self._close_all(stale if room else [*stale, fresh])

    def drop_idle(self) -> None:
        """Close every idle connection (one was found lost: the others may be too)."""
        with self._cond:
            stale, self._idle = self._idle, []
        self._discard(stale)

    def close(self) -> None:
        """No more connections: the idle ones are closed now, those in use when given back."""
        with self._cond:
            self._closed = True
            stale, self._idle = self._idle, []
            self._cond.notify_all()  # a waiting take() returns None
        self._discard(stale)

    def _discard(self, conns: list[C]) -> None:
        self._free(len(conns))
        self._close_all(conns)

    def _free(self, n: int) -> None:
        with self._cond:
            self._opened -= n
            for _ in range(n):
                self._cond.notify()

    def _close_all(self, conns: list[C]) -> None:
        for conn in conns:
            with contextlib.suppress(Exception):  # a lost connection may fail to close; it is gone anyway
                self._close_one(conn)
