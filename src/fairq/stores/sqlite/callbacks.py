"""Callbacks inside fairq's transaction: a settle effect, an Inbox apply.

A callback gets fairq's own connection while its call's transaction is open,
and must leave that transaction open: a COMMIT or ROLLBACK there would end
it for the call, and for every other call grouped into it (store.group),
whose answers could then no longer be told truly. So SQLite's authorizer,
which it asks about every statement it prepares, refuses on fairq's
connections, while a callback runs, every statement that would end the
transaction (COMMIT, END, ROLLBACK, ``with conn:``, ``executescript``, which
commits first) or release or roll back one of fairq's savepoints. The
refused statement raises inside the callback, and its call raises
UsageError with nothing of it written.

SQLite asks only when it prepares a statement, and the sqlite3 module keeps
prepared statements by their text: fairq's own transaction and savepoint
statements are therefore spelled with a comment (the constants below), so
an application's plain ``COMMIT`` is never one that fairq prepared while
nothing was refused.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import TypeVar

from ...errors import UsageError
from .failures import from_application

T = TypeVar("T")

#: fairq's own transaction statements (see the module's docstring for the comment).
BEGIN_WRITE = "BEGIN IMMEDIATE -- fairq"
BEGIN_READ = "BEGIN -- fairq"
COMMIT = "COMMIT -- fairq"
ROLLBACK = "ROLLBACK -- fairq"
SAVEPOINT_CALL = "SAVEPOINT fairq_call -- fairq"
RELEASE_CALL = "RELEASE fairq_call -- fairq"
UNDO_CALL = "ROLLBACK TO fairq_call -- fairq"
_SAVEPOINT_CALLBACK = "SAVEPOINT fairq_callback -- fairq"
_RELEASE_CALLBACK = "RELEASE fairq_callback -- fairq"

# The savepoints fairq's calls and callbacks run in (SQLite compares names without case).
_OWN_SAVEPOINTS = frozenset({"fairq", "fairq_call", "fairq_callback"})


@contextlib.contextmanager
def default_factories(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run a block with the connection's row and text factories at the defaults
    fairq's SQL reads rows with, and put back the ones found there after it,
    whatever the block did to them (an application's connection joined for
    the outbox, or an effect or apply that set its own on fairq's)."""
    saved = (conn.row_factory, conn.text_factory)
    conn.row_factory, conn.text_factory = None, str
    try:
        yield conn
    finally:
        conn.row_factory, conn.text_factory = saved


Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]


class OwnConnection(sqlite3.Connection):
    """The class of fairq's own connections, so they can be told from an
    application's. While a callback runs on one, it can neither be closed nor
    have its authorizer replaced: either would take the transaction from under
    the call (and its group)."""

    guard: CallbackGuard | None = None

    def close(self) -> None:
        self._refuse_in_callback("close fairq's connection")
        super().close()

    def set_authorizer(self, authorizer_callback: Authorizer | None) -> None:
        self._refuse_in_callback("replace the authorizer of fairq's connection")
        super().set_authorizer(authorizer_callback)

    def _refuse_in_callback(self, what: str) -> None:
        if self.guard is not None and self.guard.running:
            raise UsageError(f"a settle effect or Inbox apply cannot {what}; nothing of its call was written")


class OwnCursor(sqlite3.Cursor):
    """The class of the cursor a fairq connection keeps for its write path
    (Database.cursor), so its statements can be told apart like the
    connection's own."""


class CallbackGuard:
    """The authorizer of one fairq connection, and the callbacks run on it."""

    __slots__ = ("running", "_refused")

    def __init__(self, conn: OwnConnection) -> None:
        self.running = False  # a callback runs on the connection now
        self._refused: str | None = None  # the statement refused while the callback ran
        conn.set_authorizer(self._authorize)
        conn.guard = self

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if self.running and (
            action == sqlite3.SQLITE_TRANSACTION
            or (action == sqlite3.SQLITE_SAVEPOINT and arg1 != "BEGIN"
                and (arg2 or "").lower() in _OWN_SAVEPOINTS)
        ):
            self._refused = f"{arg1} {arg2}" if arg2 else str(arg1)
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def run(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], what: str) -> T:
        """fn(conn) in a savepoint of the open transaction, which it cannot end."""
        conn.execute(_SAVEPOINT_CALLBACK)
        self._refused = None
        self.running = True
        try:
            with default_factories(conn):  # what the callback sets on the connection stays with it
                result = fn(conn)
        except BaseException as exc:
            if self._refused is None:
                from_application(exc)  # the application's own error: it reaches the caller as it is
                raise
            raise UsageError(self._refusal(what)) from exc
        finally:
            self.running = False
        if self._refused is not None:  # the callback caught the refusal and went on
            raise UsageError(self._refusal(what))
        try:
            # Still inside: the callback's writes join this call's transaction.
            conn.execute(_RELEASE_CALLBACK)
        except sqlite3.OperationalError as exc:  # ended some way the authorizer was not asked about
            raise UsageError(
                f"{what} ended the transaction it runs in; fairq wrote nothing more, and what "
                "the callback committed stays"
            ) from exc
        return result

    def _refusal(self, what: str) -> str:
        return (f"{what} tried to end the transaction it runs in ({self._refused}); that is refused "
                "(no COMMIT, ROLLBACK, `with conn:` or executescript, which commits first, inside "
                "it: fairq commits), and nothing of this call was written")
