"""A queue's psycopg connections (a small pool): opening, reads, write
transactions (own or joined to an application's), callbacks.

Holds every BEGIN, COMMIT and ROLLBACK of the PostgreSQL store. Writes run
at READ COMMITTED (each verb takes explicit row locks where a decision
depends on a read); reads run in one REPEATABLE READ READ ONLY snapshot.
Each call takes a connection of the pool (pool.Pool, at most the URL's
fairq_pool) and has it to itself from BEGIN to the end, so threads sharing
a queue run their calls at once. Every session fairq opens is bounded
(url.SESSION_BOUNDS): a session frozen inside a transaction is ended by the
server, which releases its locks. psycopg is imported here, lazily: a missing driver is a UsageError
naming the `fairq[postgres]` extra. Knows nothing about queues.
"""

from __future__ import annotations

import contextlib
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ... import _crash
from ...errors import InvalidInput, ReadOnly, StoreError, Unavailable, UsageError
from .failures import from_application, reraise, typed
from .pool import Pool
from .url import Target, parse, redacted, scrubbed

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

#: fairq's own connections, told apart from an application's (an effect's
#: connection is fairq's; an outbox enqueue must bring the application's).
_OWN: weakref.WeakSet[Any] = weakref.WeakSet()


def load_psycopg() -> Any:
    """The psycopg module, or a UsageError saying how to install it."""
    try:
        import psycopg
    except ImportError as exc:
        raise UsageError("a PostgreSQL URL needs psycopg 3, which is not installed: "
                         "pip install 'fairq[postgres]'") from exc
    return psycopg


def checked_target(driver: Any, url: str) -> Target:
    """The URL taken apart (url.parse) and checked as libpq will read it:
    InvalidInput naming the parameter it refuses, before anything connects."""
    target = parse(url)
    try:
        params, problem = driver.conninfo.conninfo_to_dict(target.conninfo), None
    except driver.ProgrammingError as exc:
        params, problem = {}, str(exc)
    if problem is not None:  # the driver's text may quote a secret: scrubbed, and its error not kept
        text = scrubbed(problem, target.conninfo)
        named = re.search(r'parameter: "([^"]*)"', text)
        field = named.group(1) if named else "url"
        raise InvalidInput(field, f"is not valid in {redacted(target.conninfo)}: {text}")
    ports = str(params.get("port") or "").split(",")
    if not all(port.strip().isdigit() or not port.strip() for port in ports):
        raise InvalidInput("port", f"must be a port number (or a list of them, one per host), "
                                   f"got {params['port']!r}")
    return target


def in_transaction(conn: Any) -> bool:
    """Is this psycopg connection inside an open (or failed) transaction?"""
    return int(conn.info.transaction_status) in (2, 3)  # INTRANS, INERROR


class PgDatabase:
    """A small pool of psycopg connections in autocommit mode, with explicit
    transactions.

    Each call (a write transaction or a read snapshot) takes one connection of
    the pool (pool.Pool: at most the URL's fairq_pool, opened when needed)
    and keeps it from BEGIN to COMMIT or ROLLBACK, so threads sharing one
    PgDatabase run their calls at once. A connection found lost (a call
    raised Unavailable, or the driver closed it) is closed, with every idle
    one (a server restart ends them all); the next call opens a new one. The
    call that met the loss still raises Unavailable, and nothing is ever run
    twice.
    """

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        self._driver = load_psycopg()
        self._target = checked_target(self._driver, url)
        self.url = redacted(self._target.conninfo)
        self.readonly = readonly
        self.closed = False
        self._inside = threading.local()  # .busy: this thread's call has its transaction open
        first, self.place = self._open()
        self._pool: Pool[Any] = Pool(self._open_here, _close, self._target.pool)
        self.pool_size = self._target.pool
        self._pool.renew(first)

    @property
    def busy(self) -> bool:
        """Is a transaction of this thread's own call open (an effect or apply runs in it)?"""
        return bool(getattr(self._inside, "busy", False))

    def _open(self) -> tuple[psycopg.Connection[Any], tuple[str, str]]:
        """A new connection, and which database and schema it is in; Unavailable
        (nothing written) when the server cannot be reached."""
        try:
            conn: psycopg.Connection[Any] = self._driver.connect(
                self._target.conninfo, autocommit=True, **self._target.connect_args())
        except Exception as exc:
            reraise(exc, self.url, wrote_nothing=True, url=self._target.conninfo)
            raise
        try:
            self._bound(conn)
            if self.readonly:
                # Every transaction of this connection is read-only.
                conn.execute("SET default_transaction_read_only = on")
            # Which database and schema the queue lives in (an outbox connection must match).
            row = conn.execute("SELECT current_database(), current_schema()").fetchone()
        except Exception as exc:
            conn.close()
            reraise(exc, self.url, wrote_nothing=True, url=self._target.conninfo)
            raise
        if row is None or row[1] is None:
            conn.close()
            raise StoreError(self.url, f"{self.url}: no schema to create the queue in (search_path is empty)")
        _OWN.add(conn)
        return conn, (row[0], row[1])

    def _open_here(self) -> Any:
        """A new connection, refused (StoreError) unless it is in the queue's database and schema."""
        conn, place = self._open()
        if place != self.place:
            conn.close()
            raise StoreError(self.url, f"{self.url}: the new connection is in {place!r}, not in the queue's "
                                       f"database and schema {self.place!r}")
        return conn

    def _bound(self, conn: Any) -> None:
        """Ask the server for fairq's session bounds (url.SESSION_BOUNDS) where
        nothing set them; a fairq_ URL parameter's value wins over any."""
        session = self._target.session
        # Only settings still at the server's built-in default (or named by a
        # fairq_ URL parameter) change: the server's, database's, role's and the
        # URL's own options=-c settings are kept.
        conn.execute(
            "SELECT set_config(s.name, s.value, false) "
            "FROM unnest(%(names)s::text[], %(values)s::text[]) AS s (name, value) "
            "JOIN pg_settings AS p ON p.name = s.name "
            "WHERE p.source = 'default' OR s.name = ANY(%(forced)s::text[])",
            {"names": list(session), "values": list(session.values()), "forced": sorted(self._target.forced)})

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection of the pool for one call, given back when the block
        ends: kept for the next call only if it ended idle and not lost."""
        conn = self._pool.take()
        if conn is None:
            self.refuse_closed()
            raise UsageError(f"{self.url} was closed (close() was called); open it again to go on")
        lost = False
        try:
            yield conn
        except Unavailable:
            lost = True
            raise
        finally:
            lost = lost or conn.closed
            if lost:
                self._pool.drop_idle()  # they may be gone too (a server restart): the next call opens a new one
            self._pool.give(conn, keep=not lost and int(conn.info.transaction_status) == 0)  # 0: IDLE

    def reconnect(self) -> None:
        """Open a new connection in place of the idle ones, now; Unavailable
        (keeping them) while the server cannot be reached."""
        self.refuse_reentry()
        self._pool.renew(self._open_here())

    def _fail(self, exc: BaseException, *, wrote_nothing: bool = False) -> None:
        """Raise the fairq error for `exc` (if any); Unavailable tells _connection the connection is lost."""
        err = typed(exc, self.url, wrote_nothing=wrote_nothing, url=self._target.conninfo)
        if err is not None:
            raise err from exc

    def close(self) -> None:
        """Close every connection: the idle ones now, those in use when their call ends."""
        self.closed = True
        self._pool.close()

    def refuse_write(self) -> None:
        self.refuse_closed()
        if self.readonly:
            raise ReadOnly(self.url, f"{self.url} was opened read-only; open it without readonly=True to write")

    def refuse_closed(self) -> None:
        if self.closed:
            raise UsageError(f"{self.url} was closed (close() was called); open it again to go on")

    def refuse_reentry(self) -> None:
        """Refuse a call from inside this connection's own open transaction (an
        effect or apply calling the Queue or Inbox it runs under)."""
        self.refuse_closed()
        if self.busy:
            raise UsageError("a fairq call from inside its own effect or apply: the transaction is still "
                             "open; use the connection the callback was given")

    @contextlib.contextmanager
    def write(self, name: str, before_commit: Callable[[], None] | None = None) -> Iterator[Any]:
        """One READ COMMITTED transaction on one connection of the pool: commits
        when the block ends (after before_commit), rolls back on any exception,
        a failing COMMIT included."""
        self.refuse_write()
        self.refuse_reentry()
        with self._connection() as conn:
            try:
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            except Exception as exc:
                self._fail(exc, wrote_nothing=True)
                raise
            self._inside.busy = True
            try:
                yield conn
                if before_commit is not None:
                    before_commit()
                if int(conn.info.transaction_status) != 2:  # a statement failed, or the block ended it
                    raise UsageError(f"{name}: the transaction was ended or failed inside the call; "
                                     "nothing is certain")
                _crash.point(name, "before_commit")
                conn.execute("COMMIT")
            except BaseException as exc:
                _rollback(conn)
                self._fail(exc)
                raise
            finally:
                self._inside.busy = False
        _crash.point(name, "after_commit")

    def statement(self, name: str, sql: str, params: dict[str, Any]) -> list[Any]:
        """One statement in autocommit on one connection of the pool: its own
        transaction, committed when its rows arrive (one round trip). Refused
        as write() refuses; `<name>.before_commit` is passed before it is
        sent, and the caller passes `<name>.after_commit` once it has the
        answer. A lost connection is Unavailable: the statement may or may
        not have committed."""
        self.refuse_write()
        self.refuse_reentry()
        with self._connection() as conn:
            _crash.point(name, "before_commit")
            try:
                rows: list[Any] = conn.execute(sql, params).fetchall()
            except BaseException as exc:
                self._fail(exc)
                raise
        return rows

    @contextlib.contextmanager
    def join(self, conn: Any, before_commit: Callable[[], None] | None = None) -> Iterator[Any]:
        """A write inside the application's open transaction on `conn` (the
        outbox): a SAVEPOINT; never COMMIT, never ROLLBACK of theirs."""
        self.refuse_write()
        self.check_joinable(conn)
        try:
            conn.execute("SAVEPOINT fairq")
        except Exception as exc:
            reraise(exc, self.url)
            raise
        try:
            yield conn
            if before_commit is not None:
                before_commit()
            # This call's writes become part of the application's transaction.
            conn.execute("RELEASE SAVEPOINT fairq")
        except BaseException as exc:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK TO SAVEPOINT fairq")
                conn.execute("RELEASE SAVEPOINT fairq")
            reraise(exc, self.url)
            raise

    def check_joinable(self, conn: Any) -> None:
        """Refuse (InvalidInput) anything but the application's open psycopg
        connection, inside a transaction, on this queue's database and schema."""
        if not isinstance(conn, load_psycopg().Connection):
            raise InvalidInput("conn", f"must be a psycopg.Connection, not {type(conn).__name__}")
        if conn in _OWN:
            raise InvalidInput("conn", "is fairq's own connection (a settle effect's or an Inbox apply's), "
                                       "whose transaction belongs to that call; pass the application's own")
        if conn.closed or not in_transaction(conn):
            raise InvalidInput("conn", "is not inside a transaction: begin one and commit it yourself; "
                                       "fairq joins it and never commits it")
        try:
            row = conn.execute("SELECT current_database(), current_schema()").fetchone()
        except Exception as exc:
            reraise(exc, self.url)
            raise
        if row is None or (row[0], row[1]) != self.place:
            raise InvalidInput("conn", f"is on {row!r}, not on the queue's database and schema {self.place!r}")

    def read(self, fn: Callable[[Any], T]) -> T:
        """fn(conn) in one read-only snapshot, on one connection of the pool."""
        self.refuse_reentry()
        with self._connection() as conn:
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                self._inside.busy = True
                try:
                    return fn(conn)
                finally:
                    self._inside.busy = False
                    _rollback(conn)
            except Exception as exc:
                self._fail(exc, wrote_nothing=True)
                raise

    def run_callback(self, conn: Any, fn: Callable[[Any], T], what: str) -> T:
        """fn(conn) inside the open transaction, which it must leave open; a
        savepoint around it undoes only its own writes if it raises."""
        conn.execute("SAVEPOINT fairq_callback")
        try:
            result = fn(conn)
        except BaseException as exc:
            from_application(exc)  # the application's own error: it reaches the caller as it is
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK TO SAVEPOINT fairq_callback")
            raise
        try:
            # Still inside: the callback's writes join this call's transaction.
            conn.execute("RELEASE SAVEPOINT fairq_callback")
        except Exception as exc:
            lost = typed(exc, self.url)
            if isinstance(lost, Unavailable):  # the connection broke, not the callback
                raise lost from exc
            raise UsageError(f"{what} ended or broke the transaction it runs in (COMMIT, ROLLBACK or a "
                             "failed statement); fairq wrote nothing more") from exc
        return result


def _rollback(conn: Any) -> None:
    try:
        if in_transaction(conn):
            conn.execute("ROLLBACK")
    except Exception:  # noqa: S110 - the connection is gone; the server rolls back
        pass


def _close(conn: Any) -> None:
    conn.close()
