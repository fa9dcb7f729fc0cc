"""Group commit: write calls made at once on one connection share one COMMIT.

Threads sharing a Database (a Worker's, `fairq serve`'s connections, an
application's) take turns on its one connection. A write call that finds a
transaction open joins it instead of beginning its own; each call runs
after the first inside its own SAVEPOINT, so its failure undoes only its
own statements (the first call's failure rolls back the transaction, which
holds its statements alone).
When a call's savepoint is released and another write call is waiting for
the connection, it hands the connection over and waits; the last call of
the group (the one that finds nobody waiting) COMMITs for all, and only
then is any call of the group answered::

    thread A  BEGIN  [A ...]                                            COMMIT -> A, B, C answered
    thread B                                 [SAVEPOINT B ... RELEASE]    |
    thread C                                     [SAVEPOINT C ... ROLLBACK TO C] (C raises its own error)

A lone call pays nothing more: it runs no savepoint, finds nobody waiting
and commits at once; there is no timer. Reads wait for an open group to end
(they would otherwise see its writes before they commit), and while a read
waits no new group begins. This module holds the group's BEGIN IMMEDIATE,
COMMIT and ROLLBACK; fairq.stores.sqlite.transactions the per-call savepoint.
"""

from __future__ import annotations

import sqlite3
import threading

from ... import _crash
from ...errors import UsageError
from .callbacks import BEGIN_WRITE, COMMIT, ROLLBACK
from .turns import WriteTurns

#: A group commits once it holds this many calls, even with more waiting, so
#: the first caller's answer does not wait on an endless stream of others.
MAX_GROUP = 64

REENTRY = ("a fairq call from inside its own effect or apply: the transaction is still "
           "open; use the connection the callback was given")


def _armed() -> bool:
    """Whether any crash or freeze point is set (unset, a group skips its points' loop)."""
    return _crash.ARMED is not None or _crash.FROZEN is not None


class Interrupted(BaseException):
    """What finish() raises when a call waiting for its group's COMMIT is
    interrupted (a Ctrl-C, its `__cause__`): the call's writes are in the
    group, which goes on and commits or fails without it; that is not the
    interrupted caller's to decide, and it cannot know which."""


class Group:
    """One open write transaction and the calls that joined it."""

    __slots__ = ("names", "size", "done", "error")

    def __init__(self) -> None:
        self.names: list[str] = []  # verbs of the calls whose writes it holds (their crash points)
        self.size = 0  # calls that ran in it, failed ones included
        # Set after the COMMIT (or the ROLLBACK) that ends it; made by the first
        # call that hands the connection on, so a lone call makes none.
        self.done: threading.Event | None = None
        self.error: BaseException | None = None  # why it did not commit, if it did not


class Writers:
    """Who has the connection, the open group, and who waits for either."""

    def __init__(self, conn_lock: threading.Lock, turns: WriteTurns | None, cursor: sqlite3.Cursor) -> None:
        self.conn_lock = conn_lock  # held by the call (or read) using the connection
        self.turns = turns
        self.cursor = cursor  # the connection's, for BEGIN, COMMIT and ROLLBACK
        self._state = threading.Condition(threading.Lock())  # guards the fields below
        self._waiting = 0  # write calls waiting for the connection (they will join a group)
        self._reading = 0  # reads (and close) waiting for the open group to end
        self.group: Group | None = None
        self.owner: int | None = None  # the thread using the connection now
        #: Groups committed and the calls they held (for tests and benchmarks).
        self.groups = 0
        self.calls = 0

    @property
    def waiting(self) -> int:
        """Write calls waiting for the connection now (they will join the open group)."""
        return self._waiting

    # -- taking the connection --------------------------------------------------

    def refuse_reentry(self) -> None:
        """Refuse a call from the thread already using the connection: an
        effect or apply calling the Queue or Inbox it runs under."""
        if self.owner == threading.get_ident():
            raise UsageError(REENTRY)

    def take_for_write(self) -> None:
        """Hold the connection for a write call (joining an open group, or
        free to begin one when no read is waiting)."""
        me = threading.get_ident()
        if self.owner == me:
            raise UsageError(REENTRY)
        if self.conn_lock.acquire(False):  # nobody has it: no need to count as waiting
            # A read that starts waiting just after this look waits for the
            # connection, then for this call's group to end, as if it came later.
            if self.group is not None or not self._reading:
                self.owner = me
                return
            self.conn_lock.release()
        while True:
            with self._state:
                self._waiting += 1
            try:
                self.conn_lock.acquire()
            except BaseException:  # interrupted (a Ctrl-C): no longer waiting, or groups would wait for it
                with self._state:
                    self._waiting -= 1
                raise
            with self._state:
                self._waiting -= 1
                if self.group is not None or not self._reading:
                    self.owner = me
                    return
            self.conn_lock.release()  # a read waits for the connection between groups: it goes first
            with self._state:
                while self._reading:
                    self._state.wait()

    def take_idle(self) -> None:
        """Hold the connection between groups (a read, or close)."""
        self.refuse_reentry()
        with self._state:
            self._reading += 1
        try:
            while True:
                self.conn_lock.acquire()
                with self._state:
                    if self.group is None:
                        self.owner = threading.get_ident()
                        return
                self.conn_lock.release()
                with self._state:
                    while self.group is not None:
                        self._state.wait()
        except BaseException:
            self._done_reading()
            raise

    def let_go(self, *, reading: bool = False) -> None:
        """Give the connection back (after a read with reading=True)."""
        self.owner = None
        self.conn_lock.release()
        if reading:
            self._done_reading()

    def _done_reading(self) -> None:
        with self._state:
            self._reading -= 1
            self._state.notify_all()

    # -- the group -------------------------------------------------------------

    def begin(self, conn: sqlite3.Connection) -> tuple[Group, bool]:
        """(the open group, False), or (a new one, True): BEGIN IMMEDIATE,
        after this process's turn at the file's write lock, if there is none."""
        group = self.group
        if group is not None:
            return group, False
        if self.turns is not None:
            self.turns.acquire()
        try:
            self.cursor.execute(BEGIN_WRITE)
        except BaseException:
            if self.turns is not None:
                self.turns.release()
            raise
        group = self.group = Group()
        return group, True

    def finish(self, conn: sqlite3.Connection, group: Group) -> None:
        """After a call's savepoint: hand the connection to a waiting call, or
        end the group (COMMIT); return once the group has ended either way."""
        group.size += 1
        if group.error is None and not conn.in_transaction:
            # SQLite rolled the whole transaction back under a failing statement
            # (a full disk can), or a callback ended it: nothing of the group stands.
            group.error = UsageError("the transaction was ended inside a call of its group; "
                                     "nothing of the group was written")
        # A call counts itself waiting before it waits for the connection, which
        # this one holds: one seen here takes the connection next (a call that
        # starts waiting just after this look begins the next group).
        if self._waiting > 0 and group.error is None and group.size < MAX_GROUP:
            done = group.done
            if done is None:
                done = group.done = threading.Event()
            self.let_go()
            try:
                done.wait()
            except BaseException as exc:
                raise Interrupted from exc
            return
        try:
            self._end(conn, group)
        finally:
            self.let_go()
            if group.error is None and _armed():
                for name in dict.fromkeys(group.names):
                    _crash.point(name, "after_commit")  # committed, and no call answered yet
            if group.done is not None:  # calls of the group wait for it
                group.done.set()

    def _end(self, conn: sqlite3.Connection, group: Group) -> None:
        """COMMIT the group (or ROLLBACK what is left of a broken one) and let
        the next group begin."""
        try:
            if group.error is None:
                if _armed():
                    for name in dict.fromkeys(group.names):
                        _crash.point(name, "before_commit")
                self.cursor.execute(COMMIT)
        except BaseException as failure:
            group.error = failure
        finally:
            try:
                if conn.in_transaction:
                    self.cursor.execute(ROLLBACK)
            finally:
                if self.turns is not None:
                    self.turns.release()
                # Only the connection's holder (this call) changes these. A read
                # counts itself before it looks at the group under the lock, so
                # one that waits for this group is woken below.
                self.group = None
                if group.error is None:
                    self.groups += 1
                    self.calls += group.size
                if self._reading:  # only a read (or close) waits for the group to end
                    with self._state:
                        self._state.notify_all()
