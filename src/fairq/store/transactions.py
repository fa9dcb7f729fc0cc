"""fairq's write transactions on its own connection or joined to an application's.

A write is one ``BEGIN IMMEDIATE`` transaction that commits when its block
ends and rolls back on any exception, a failing COMMIT included; a joined
write is a SAVEPOINT inside the application's open transaction. Either way a
failure of fairq's own statements leaves as a typed error (store.failures).
fairq.store.sqlite's Database hands these out; it and this module hold every
BEGIN, COMMIT and ROLLBACK in fairq.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import _crash
from ..errors import UsageError
from .failures import raise_typed

if TYPE_CHECKING:  # Database hands out these transactions: a type, never an import at run time
    from .sqlite import Database


class Transaction:
    """``with db.write(name) as conn:`` -- one BEGIN IMMEDIATE transaction.

    Commits when the block ends (after `before_commit`, if given); rolls back
    on any exception, including a failing COMMIT, and re-raises it. Holds the
    database's thread lock for its whole life.
    """

    __slots__ = ("_db", "_name", "before_commit")

    def __init__(self, db: Database, name: str, before_commit: Callable[[], None] | None) -> None:
        self._db = db
        self._name = name
        self.before_commit = before_commit

    def __enter__(self) -> sqlite3.Connection:
        db = self._db
        db.lock.acquire()
        try:
            db.refuse_reentry()
            db.conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            db.lock.release()
            raise_typed(exc, self._db.path)
            raise
        return db.conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        conn = self._db.conn
        try:
            if exc is None:
                try:
                    if self.before_commit is not None:
                        self.before_commit()
                    if not conn.in_transaction:
                        raise UsageError(
                            f"{self._name}: the transaction was ended inside the call; nothing is certain"
                        )
                    _crash.point(self._name, "before_commit")
                    conn.execute("COMMIT")
                except BaseException as failure:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise_typed(failure, self._db.path)
                    raise
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            self._db.lock.release()
        if exc is None:
            _crash.point(self._name, "after_commit")
        else:
            raise_typed(exc, self._db.path)


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


class JoinedTransaction:
    """``with db.join(conn) as conn:`` -- a write inside the caller's own transaction.

    For an application that keeps its tables in the queue's file (the outbox
    pattern): fairq's statements run on the application's connection, inside
    the transaction the application has open, so the application's write and
    fairq's commit together or not at all -- when the application commits.
    A SAVEPOINT wraps them: if the call fails, its own statements are undone
    and the error propagates; the application's earlier statements and its
    transaction are left for it to roll back. Never COMMIT, never ROLLBACK.

    The connection's row and text factories are set to the defaults for the
    call and restored after it.
    """

    __slots__ = ("_db", "_conn", "before_commit", "_factories")

    def __init__(self, db: Database, conn: Any, before_commit: Callable[[], None] | None) -> None:
        self._db = db
        self._conn = conn
        self.before_commit = before_commit
        self._factories: contextlib.AbstractContextManager[sqlite3.Connection] | None = None

    def __enter__(self) -> sqlite3.Connection:
        conn: sqlite3.Connection = self._conn
        self._db.check_joinable(conn)
        self._factories = default_factories(conn)
        self._factories.__enter__()
        try:
            self._db.check_same_file(conn)
            # Nested in the application's transaction: releasing it commits nothing.
            conn.execute("SAVEPOINT fairq")
        except BaseException as exc:
            self._restore()
            raise_typed(exc, self._db.path)
            raise
        return conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        conn = self._conn
        try:
            if exc is None:
                try:
                    if self.before_commit is not None:
                        self.before_commit()
                    # This call's writes become part of the application's transaction.
                    conn.execute("RELEASE fairq")
                except BaseException as failure:
                    self._undo()
                    raise_typed(failure, self._db.path)
                    raise
            else:
                self._undo()
        finally:
            self._restore()
        if exc is not None:
            raise_typed(exc, self._db.path)

    def _undo(self) -> None:
        # Only this call's statements: the application's transaction stays open.
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK TO fairq")
            self._conn.execute("RELEASE fairq")

    def _restore(self) -> None:
        if self._factories is not None:
            self._factories.__exit__(None, None, None)
            self._factories = None
