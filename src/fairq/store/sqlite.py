"""One SQLite connection with fairq's pragmas, and its transactions.

This module owns every BEGIN, COMMIT and ROLLBACK in fairq: a write is one
``BEGIN IMMEDIATE`` transaction that commits when its block ends and rolls
back on any exception, a failing COMMIT included. Lock waits are absorbed by
SQLite's busy timeout; a timeout that is really exceeded becomes fairq.Busy.
Failures are read by fairq.store.failures. It knows nothing about queues.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

from .. import _crash
from ..errors import InvalidInput, ReadOnly, SchemaError, UsageError
from .failures import from_application, is_busy, raise_typed, translate

T = TypeVar("T")

MIN_SQLITE = (3, 37, 0)
SYNCHRONOUS = {"full": "PRAGMA synchronous = FULL", "normal": "PRAGMA synchronous = NORMAL"}

#: The longest busy timeout SQLite takes: its milliseconds are a C int.
MAX_BUSY_TIMEOUT = 2_147_483.647


def check_sqlite_version(found: tuple[int, int, int] = sqlite3.sqlite_version_info) -> None:
    """Refuse to run on an SQLite without STRICT tables (3.37.0)."""
    if tuple(found) < MIN_SQLITE:
        need = ".".join(map(str, MIN_SQLITE))
        have = ".".join(map(str, found))
        raise SchemaError(f"fairq needs SQLite >= {need} (STRICT tables); this Python has SQLite {have}")


def check_json_functions(conn: sqlite3.Connection) -> None:
    """Refuse an SQLite built without its JSON functions (batches pass id lists as JSON)."""
    try:
        conn.execute("SELECT count(*) FROM json_each('[1]')").fetchone()
    except sqlite3.OperationalError as exc:
        raise SchemaError(f"fairq needs SQLite's JSON functions (json_each); this SQLite has none: {exc}") from exc


def read_script(name: str) -> str:
    """The text of an SQL file shipped inside fairq.store."""
    return importlib.resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def statements(script: str) -> list[str]:
    """Split an SQL script into complete statements (triggers included).

    Scripts run statement by statement inside the caller's transaction, never
    through executescript(), which would commit first.
    """
    out: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip().strip(";").strip() and not _only_comments(pending):
                out.append(pending.strip())
            pending = ""
    if pending.strip() and not _only_comments(pending):
        raise SchemaError(f"incomplete SQL statement at end of script: {pending.strip()[:60]!r}")
    return out


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


def main_file(conn: sqlite3.Connection) -> str:
    """The file of the connection's main database ('' if temporary or in memory)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(file or "")
    return ""


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _read_only_uri(path: Any) -> str:
    """An SQLite URI that opens an existing file read-only, never creating it.

    Reading a WAL file takes a -shm file next to it, which SQLite cannot
    create in a folder it may not write (read-only media). There, if no
    -wal file is left either, the database file alone is the whole queue,
    and it is opened as immutable: a snapshot nothing else writes.
    """
    name = os.fsdecode(os.path.abspath(os.fspath(path)))
    uri = "file:" + urllib.parse.quote(name) + "?mode=ro"
    if not _writable_folder(name) and not os.path.exists(name + "-wal"):
        uri += "&immutable=1"
    return uri


def _writable_folder(name: str) -> bool:
    return os.access(os.path.dirname(name) or ".", os.W_OK)


def _enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL, waiting out other connections doing the same.

    Changing the journal mode needs an exclusive lock, and SQLite answers
    SQLITE_BUSY at once (without its busy handler) while another connection
    is opening the same fresh file; so this waits here, up to the busy timeout.
    """
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


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


class OwnConnection(sqlite3.Connection):
    """The class of fairq's own connections, so they can be told from an application's."""


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
        conn = self._conn
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


class Database:
    """A connection opened with fairq's pragmas; safe to share between threads.

    Threads take turns through one lock, so each transaction has the
    connection to itself. Many processes may open the same file.
    """

    def __init__(
        self, path: Any, *, synchronous: str = "full", busy_timeout: float = 10.0,
        inspect: Callable[[sqlite3.Connection], None] | None = None, readonly: bool = False,
    ) -> None:
        """`inspect(conn)`, if given, runs before anything may write the file
        (switching it to WAL does): it refuses a file that is not its owner's.
        readonly: open the existing file without ever writing it (no WAL
        switch, no pragmas that write); write() and join() refuse."""
        check_sqlite_version()
        if synchronous not in SYNCHRONOUS:
            raise InvalidInput("synchronous", f"must be 'full' or 'normal', got {synchronous!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) \
                or not 0 <= busy_timeout <= MAX_BUSY_TIMEOUT:
            raise InvalidInput("busy_timeout", f"must be between 0 and {MAX_BUSY_TIMEOUT} seconds "
                                               f"(SQLite counts it in int milliseconds), got {busy_timeout!r}")
        self.path = path
        self.readonly = readonly
        self.closed = False
        self.lock = threading.RLock()
        try:
            # SQLite's busy handler absorbs lock waits up to busy_timeout. (Shorter
            # pauses than its 1, 2, 5 ... ms were measured: under contention they
            # burn CPU and do not raise throughput.)
            self.conn = sqlite3.connect(
                _read_only_uri(path) if readonly else path, isolation_level=None, timeout=busy_timeout,
                check_same_thread=False, factory=OwnConnection, uri=readonly,
            )
        except sqlite3.Error as exc:
            raise SchemaError(f"cannot open {path!s}: {exc}") from exc
        try:
            with translate(path):
                if inspect is not None:
                    inspect(self.conn)
                if not readonly:
                    _enable_wal(self.conn, busy_timeout)
                    self.conn.execute(SYNCHRONOUS[synchronous])
                self.conn.execute("PRAGMA foreign_keys = ON")
                check_json_functions(self.conn)
                self.file = main_file(self.conn)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            if not readonly and not _writable_folder(os.fsdecode(os.path.abspath(os.fspath(path)))):
                raise ReadOnly(path, f"cannot open {path!s} to write ({exc}): its folder cannot be written "
                                     "(read-only filesystem or permissions), and SQLite keeps its -wal and "
                                     "-shm files there; make it writable, or open with readonly=True "
                                     "(fairq status and the other looking commands do) to read") from exc
            raise SchemaError(f"cannot open {path!s}: {exc}") from exc
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.conn.close()

    def refuse_write(self) -> None:
        """Refuse (UsageError, ReadOnly) a write on a closed or read-only connection."""
        self.refuse_closed()
        if self.readonly:
            raise ReadOnly(self.path, f"{self.path!s} was opened read-only; open it without "
                                      "readonly=True to write")

    def refuse_closed(self) -> None:
        if self.closed:
            raise UsageError(f"{self.path!s} was closed (close() was called); open it again to go on")

    def write(self, name: str, before_commit: Callable[[], None] | None = None) -> Transaction:
        """One BEGIN IMMEDIATE transaction, named for its crash points."""
        self.refuse_write()
        return Transaction(self, name, before_commit)

    def join(self, conn: Any, before_commit: Callable[[], None] | None = None) -> JoinedTransaction:
        """A write inside `conn`'s open transaction (see JoinedTransaction)."""
        self.refuse_write()
        return JoinedTransaction(self, conn, before_commit)

    def check_joinable(self, conn: Any) -> None:
        """Refuse (InvalidInput) anything but an open connection inside a transaction."""
        if not isinstance(conn, sqlite3.Connection):
            raise InvalidInput("conn", f"must be a sqlite3.Connection, not {type(conn).__name__}")
        if isinstance(conn, OwnConnection):
            raise InvalidInput("conn", "is fairq's own connection (a settle effect's or an Inbox apply's), "
                                       "whose transaction belongs to that call; pass the application's own")
        try:
            inside = conn.in_transaction
        except sqlite3.ProgrammingError as exc:
            raise InvalidInput("conn", f"is not usable: {exc}") from None
        if not inside:
            raise InvalidInput("conn", "is not inside a transaction: begin one (BEGIN IMMEDIATE) and "
                                       "commit it yourself; fairq joins it and never commits it")

    def check_same_file(self, conn: sqlite3.Connection) -> None:
        """Refuse (InvalidInput) a connection whose main database is not this file."""
        theirs = main_file(conn)
        if not theirs or not _same_file(theirs, self.file):
            raise InvalidInput("conn", f"is on {theirs or 'a temporary or in-memory database'!r}, "
                                       f"not on the queue's file {self.file!r}")

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """fn(conn) in a read transaction: every statement inside sees one snapshot."""
        conn = self.conn
        with self.lock, translate(self.path):
            self.refuse_reentry()
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    def refuse_reentry(self) -> None:
        """Refuse a call made from inside this connection's own open transaction
        (an effect or apply calling the Queue or Inbox it runs under): the lock
        lets the same thread in, and SQLite would answer with a raw error."""
        self.refuse_closed()
        if self.conn.in_transaction:
            raise UsageError(
                "a fairq call from inside its own effect or apply: the transaction is still "
                "open; use the connection the callback was given"
            )

    def run_callback(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], what: str) -> T:
        """fn(conn) inside the open transaction, which it must leave open.

        A callback that commits or rolls back (COMMIT, ROLLBACK, ``with conn:``)
        would let fairq's own writes that follow run outside the transaction.
        A savepoint around it shows whether it did; if so this raises before
        fairq writes anything more.
        """
        conn.execute("SAVEPOINT fairq_callback")
        try:
            with default_factories(conn):  # what the callback sets on the connection stays with it
                result = fn(conn)
        except BaseException as exc:
            from_application(exc)  # the application's own error: it reaches the caller as it is
            raise
        try:
            # Still inside: the callback's writes join this call's transaction.
            conn.execute("RELEASE fairq_callback")
        except sqlite3.OperationalError as exc:
            raise UsageError(
                f"{what} ended the transaction it runs in (COMMIT, ROLLBACK or `with conn:`); "
                "fairq wrote nothing more, and what the callback committed stays"
            ) from exc
        return result

    def run_script(self, conn: sqlite3.Connection, script: str) -> None:
        """Execute every statement of a script inside the current transaction."""
        for sql in statements(script):
            conn.execute(sql)
