"""One SQLite connection with fairq's pragmas: opening it, reading, callbacks.

Database opens the file (WAL, synchronous, foreign keys, the SQLite features
fairq needs), runs reads in one snapshot each and hands out write
transactions, which fairq.stores.sqlite.transactions keeps, grouped with the write
calls made at the same time (fairq.stores.sqlite.group): those modules and this one
hold every BEGIN, COMMIT and ROLLBACK in fairq. Writers of every process
queue in turn for the file (fairq.stores.sqlite.turns), then SQLite's busy timeout
absorbs what wait is left; a timeout that is really exceeded becomes fairq.Busy.
Failures are read by fairq.stores.sqlite.failures. It knows nothing about queues.
"""

from __future__ import annotations

import importlib.resources
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import InvalidInput, ReadOnly, SchemaError, UsageError
from .failures import is_busy, translate
from .group import Writers
from .callbacks import BEGIN_READ, ROLLBACK, CallbackGuard, OwnConnection, OwnCursor
from .transactions import JoinedTransaction, Transaction
from .turns import open_turns

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
    """The text of an SQL file shipped inside fairq.stores.sqlite."""
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
    create on read-only media. There, if no -wal file is left either, the
    database file alone is the whole queue, and it is opened as immutable: a
    snapshot nothing can write. Only there: a folder that merely this user
    may not write can still be written by the queue's owner, and an
    immutable reader would not see those writes.
    """
    name = os.fsdecode(os.path.abspath(os.fspath(path)))
    uri = "file:" + urllib.parse.quote(name) + "?mode=ro"
    if _read_only_media(name) and not os.path.exists(name + "-wal"):
        uri += "&immutable=1"
    return uri


def _writable_folder(name: str) -> bool:
    return os.access(os.path.dirname(name) or ".", os.W_OK)


def _read_only_media(name: str) -> bool:
    """Is the file on a filesystem mounted read-only?"""
    try:
        return bool(os.statvfs(os.path.dirname(name) or ".").f_flag & os.ST_RDONLY)
    except OSError:
        return False


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


def check_settings(synchronous: Any, busy_timeout: Any) -> None:
    """Refuse (InvalidInput) a synchronous or busy_timeout setting SQLite cannot take."""
    if synchronous not in SYNCHRONOUS:
        raise InvalidInput("synchronous", f"must be 'full' or 'normal', got {synchronous!r}")
    if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) \
            or not 0 <= busy_timeout <= MAX_BUSY_TIMEOUT:
        raise InvalidInput("busy_timeout", f"must be between 0 and {MAX_BUSY_TIMEOUT} seconds "
                                           f"(SQLite counts it in int milliseconds), got {busy_timeout!r}")


class Database:
    """A connection opened with fairq's pragmas; safe to share between threads.

    Threads take turns on the connection; write calls made at once share one
    transaction, each in its own savepoint (store.group), and reads wait
    for it to commit. Many processes may open the same file.
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
        check_settings(synchronous, busy_timeout)
        self.path = path
        self.readonly = readonly
        self.closed = False
        self.lock = threading.Lock()
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
            # A lock timeout, a full disk, a damaged file are said as such;
            # any other failure to open is said below.
            with translate(path, classified_only=True):
                if inspect is not None:
                    inspect(self.conn)
                if not readonly:
                    _enable_wal(self.conn, busy_timeout)
                    self.conn.execute(SYNCHRONOUS[synchronous])
                self.conn.execute("PRAGMA foreign_keys = ON")
                check_json_functions(self.conn)
                self.file = main_file(self.conn)
        except sqlite3.Error as exc:
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
        # One cursor for the write path's statements whose rows are read at
        # once (a cursor per statement costs up to a microsecond more); used
        # only by the thread holding the connection.
        self.cursor: sqlite3.Cursor = self.conn.cursor(OwnCursor)
        # Write calls made at once share one COMMIT (store.group); writers of
        # every process queue for the file in turn (store.turns).
        self.writers = Writers(self.lock, None if readonly else open_turns(self.file, busy_timeout), self.cursor)
        # While a settle effect or an Inbox apply runs, it cannot end the transaction.
        self.callbacks = CallbackGuard(self.conn)

    def close(self) -> None:
        self.writers.take_idle()
        try:
            self.closed = True
            self.conn.close()
            if self.writers.turns is not None:
                self.writers.turns.close()
        finally:
            self.writers.let_go(reading=True)

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
        if self.closed or self.readonly:
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
        self.writers.take_idle()  # after the open group's COMMIT: a read sees only what committed
        try:
            with translate(self.path):
                self.refuse_closed()
                conn.execute(BEGIN_READ)
                try:
                    return fn(conn)
                finally:
                    if conn.in_transaction:
                        conn.execute(ROLLBACK)
        finally:
            self.writers.let_go(reading=True)

    def run_callback(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], what: str) -> T:
        """fn(conn) inside the open transaction, which it cannot end (store.callbacks):
        a COMMIT or ROLLBACK there is refused, and the call raises UsageError."""
        return self.callbacks.run(conn, fn, what)

    def run_script(self, conn: sqlite3.Connection, script: str) -> None:
        """Execute every statement of a script inside the current transaction."""
        for sql in statements(script):
            conn.execute(sql)
