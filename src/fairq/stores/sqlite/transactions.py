"""fairq's write calls on its own connection or joined to an application's.

A write call runs inside a ``BEGIN IMMEDIATE`` transaction that calls made
at once share (fairq.stores.sqlite.group), each call after the first in a SAVEPOINT
of its own: the call's statements are undone alone on any exception, and it returns only after the transaction's
COMMIT; a failing COMMIT makes every call of it raise. A joined write is a
SAVEPOINT inside the application's open transaction. Either way a failure of
fairq's own statements leaves as a typed error (store.failures).
fairq.stores.sqlite.connection's Database hands these out (it is their
TransactionHost: this module names what it needs of it and imports it not); it,
fairq.stores.sqlite.group and this module hold every BEGIN, COMMIT and ROLLBACK in fairq.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ...errors import StoreError, UsageError
from .callbacks import RELEASE_CALL, ROLLBACK, SAVEPOINT_CALL, UNDO_CALL, default_factories
from .failures import raise_typed
from .group import Group, Interrupted, Writers


class TransactionHost(Protocol):
    """What a transaction needs of the database that hands it out
    (fairq.stores.sqlite.connection.Database): its file, its connection and
    who writes on it, and its checks."""

    @property
    def path(self) -> Any:
        """The file, as the caller named it (for messages)."""

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection fairq's own writes run on."""

    @property
    def writers(self) -> Writers:
        """Who has the connection, and the open group."""

    @property
    def closed(self) -> bool:
        """Whether close() was called."""

    def refuse_closed(self) -> None:
        """Refuse (UsageError) a call on a closed database."""

    def check_joinable(self, conn: Any) -> None:
        """Refuse (InvalidInput) anything but an open connection inside a transaction."""

    def check_same_file(self, conn: sqlite3.Connection) -> None:
        """Refuse (InvalidInput) a connection whose main database is not this file."""


class Transaction:
    """``with db.write(name) as conn:`` -- one write call, committed with its group.

    The call runs in the group's BEGIN IMMEDIATE transaction
    (fairq.stores.sqlite.group): the first call of a group begins it; each later one
    runs inside a SAVEPOINT of its own. When its block ends, `before_commit`
    runs (if given) and the savepoint is released; on any exception the
    call's statements are undone (ROLLBACK TO its savepoint, or ROLLBACK of
    the transaction that holds only them), and the exception re-raised. Either way the block returns only after the group
    has ended: a call that returns has committed. If the group's COMMIT
    fails, every call of the group raises (the COMMIT's error, typed), and
    none of them committed. Holds the database's connection while its block
    runs.
    """

    __slots__ = ("_db", "_name", "before_commit", "_group", "_savepoint")

    def __init__(self, db: TransactionHost, name: str, before_commit: Callable[[], None] | None) -> None:
        self._db = db
        self._name = name
        self.before_commit = before_commit
        self._group: Group | None = None
        self._savepoint = False  # this call joined an open group: its statements are in a savepoint

    def __enter__(self) -> sqlite3.Connection:
        db = self._db
        writers = db.writers
        writers.take_for_write()
        conn = db.conn
        try:
            if db.closed:
                db.refuse_closed()
            self._group, began = writers.begin(conn)
        except BaseException as exc:
            writers.let_go()
            raise_typed(exc, db.path)
            raise
        if began:
            return conn  # the transaction holds this call's statements alone: a ROLLBACK undoes them
        try:
            # This call's own statements, after other calls' in the group: undone alone if it fails.
            conn.execute(SAVEPOINT_CALL)
            self._savepoint = True
        except BaseException as exc:
            self._end_call(exc)
        return conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        failure = exc
        if exc is None:
            conn = self._db.conn
            try:
                if self.before_commit is not None:
                    self.before_commit()
                if not conn.in_transaction:
                    raise UsageError(
                        f"{self._name}: the transaction was ended inside the call; nothing is certain"
                    )
                if self._savepoint:
                    conn.execute(RELEASE_CALL)
            except BaseException as err:
                failure = err
        self._end_call(failure)

    def _end_call(self, failure: BaseException | None) -> None:
        """Undo this call's statements if it failed, wait for its group to
        end, and raise what the caller is owed."""
        db = self._db
        conn = db.conn
        group = self._group
        assert group is not None
        if failure is not None:
            try:
                if conn.in_transaction and self._savepoint:
                    conn.execute(UNDO_CALL)
                    conn.execute(RELEASE_CALL)
                elif conn.in_transaction:
                    conn.execute(ROLLBACK)  # the group's first call: nothing else is in it
            except BaseException as err:  # the savepoint cannot be undone: nor can the group
                group.error = err
            if not conn.in_transaction and group.error is None:
                group.error = failure  # SQLite rolled the whole transaction back under it
        else:
            group.names.append(self._name)
        try:
            db.writers.finish(conn, group)
        except Interrupted as interrupted:  # the group goes on without this caller: its outcome is unknown
            assert interrupted.__cause__ is not None
            raise interrupted.__cause__ from None
        except BaseException as err:  # ending the group failed (it holds the connection no more)
            if group.error is None:
                group.error = err
        if group.error is not None and group.error is not failure:
            # Nothing of the group committed: each of its calls says why.
            raise_typed(group.error, db.path)
            raise StoreError(db.path, f"{db.path!s}: the transaction this call was part of did not "
                                      f"commit ({type(group.error).__name__}: {group.error}); "
                                      "nothing of this call was written") from group.error
        if failure is not None:
            raise_typed(failure, db.path)
            raise failure


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

    def __init__(self, db: TransactionHost, conn: Any, before_commit: Callable[[], None] | None) -> None:
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
