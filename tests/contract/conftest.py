"""The store fixture of the promise suite: every test in tests/contract/ runs once per store.

Adding a store is one change, here: write a class with the shape of
SqliteStore and add it to STORES under its id (the test id, e.g. `[sqlite]`). Its parts:

- `target(name)`: a fresh place a Queue opens (a file path, or a database URL whose search_path
  is a fresh schema);
- `open(target, **settings)`, `open_inbox(target)`: a fairq.Queue, a fairq.Inbox there;
- `snapshot(target)`: everything stored, for checks that a refused call wrote nothing;
- `sql(target, statement, params)`: the application's own SQL beside the queue, committed
  (the tables that effects and outbox writes touch);
- `app_connection(target)`, `BEGIN`, `IntegrityError`, `param(name)`: the application's own
  connection for an outbox enqueue, how it opens a write transaction, what a broken
  constraint raises, how its SQL names a parameter (`:name` or `%(name)s`);
- `Connection`: the connection type effects and an inbox's apply are given;
- `DEFAULTS`: Queue settings another process needs to open a target as `open` does (the
  PostgreSQL queues of this suite run on the stored model clock: `clock="model"`);
- `close()`, `check()`: run after each test: close every queue it opened, check what they
  stored (each store recounts the incrementally kept dispatch state and counters); a test may
  check sooner. `cleanup()`, if the class has it, runs last (PostgreSQL drops the test's schemas).

The tests take `make_queue`, `q`, `target` or `store` and use the public API only:
tests/test_contract_rules.py fails on a private attribute or `sqlite3` in this folder.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq
import pgcluster
from helpers import SHORT_SETTINGS, check_invariants
from pgcheck import check_pg_invariants


class SqliteStore:
    """Queues on real SQLite files in the test's tmp_path."""

    DEFAULTS: dict[str, Any] = {}  # Queue settings another process needs to open a target the same way
    BEGIN = "BEGIN IMMEDIATE"  # how the application opens a write transaction (outbox)
    IntegrityError = sqlite3.IntegrityError  # what the database raises for a broken constraint
    Connection = sqlite3.Connection  # what effects and an inbox's apply are given

    def __init__(self, tmp_path: Path, request: pytest.FixtureRequest | None = None) -> None:
        self.folder = tmp_path
        self.opened: list[fairq.Queue] = []  # closed after the test
        self.queue_files: list[Path] = []  # where a Queue was opened or refused: checked after the test

    @staticmethod
    def param(name: str) -> str:
        """How the application's SQL names a parameter on this store."""
        return f":{name}"

    def target(self, name: str = "queue") -> Any:
        return self.folder / f"{name}.db"

    def open(self, target: Any, **settings: Any) -> fairq.Queue:
        self.queue_files.append(Path(target))
        queue = fairq.Queue(target, **settings)
        self.opened.append(queue)
        return queue

    def open_inbox(self, target: Any) -> fairq.Inbox:
        return fairq.Inbox(target)

    def snapshot(self, target: Any) -> list[Any]:
        """Every stored row of every table, in a fixed order: equal before and after a call
        that must write nothing."""
        conn = sqlite3.connect(target)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            return [(t, conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall()) for t in tables]  # noqa: S608
        finally:
            conn.close()

    def sql(self, target: Any, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Run the application's own SQL beside the queue (the tables an effect or an inbox's
        apply writes) in its own committed transaction; the rows it returns."""
        conn = sqlite3.connect(target)
        try:
            with conn:
                return conn.execute(statement, params).fetchall()
        finally:
            conn.close()

    def app_connection(self, target: Any) -> sqlite3.Connection:
        """The application's own connection to the queue's database (outbox), outside any
        transaction until the application runs `BEGIN`."""
        return sqlite3.connect(target, isolation_level=None)

    def close(self) -> None:
        for queue in self.opened:
            try:
                queue.close()
            except Exception:
                pass  # the test made it fail; the check below still reads the file

    def check(self) -> None:
        for path in dict.fromkeys(self.queue_files):
            check_invariants(path)


class PostgresStore:
    """Queues on a real PostgreSQL server (the session's `pg_server`), each target a fresh
    schema: a URL whose connections use it. Queues open with the stored model clock unless
    the test gives a clock, as the promises are stated in the queue's own time."""

    BEGIN = "BEGIN"
    DEFAULTS = {"clock": "model"}  # Queue settings another process needs to open a target the same way
    Connection = None  # psycopg.Connection, set when the first store is made
    IntegrityError = None  # psycopg.errors.IntegrityError

    def __init__(self, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        import psycopg

        type(self).Connection, type(self).IntegrityError = psycopg.Connection, psycopg.IntegrityError
        self.server = request.getfixturevalue("pg_server")
        self.targets: dict[str, str] = {}  # name -> URL
        self.schemas: list[str] = []
        self.opened: list[Any] = []

    @staticmethod
    def param(name: str) -> str:
        """How the application's SQL names a parameter on this store."""
        return f"%({name})s"

    def target(self, name: str = "queue") -> Any:
        if name not in self.targets:
            schema, url = pgcluster.fresh_schema(self.server.url)
            self.schemas.append(schema)
            self.targets[name] = url
        return self.targets[name]

    def open(self, target: Any, **settings: Any) -> fairq.Queue:
        queue = fairq.Queue(target, **{**self.DEFAULTS, **settings})
        self.opened.append(queue)
        return queue

    def open_inbox(self, target: Any) -> fairq.Inbox:
        inbox = fairq.Inbox(target)
        self.opened.append(inbox)
        return inbox

    def snapshot(self, target: Any) -> list[Any]:
        """Every stored row of every table of the target's schema, in a fixed order."""
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")]
            return [(t, conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall()) for t in tables]

    def sql(self, target: Any, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """The application's own SQL beside the queue, committed; the rows it returns."""
        import psycopg

        with psycopg.connect(target) as conn:
            cursor = conn.execute(statement, params)
            rows = cursor.fetchall() if cursor.description else []
            conn.commit()
            return rows

    def app_connection(self, target: Any) -> Any:
        """The application's own connection (autocommit until it runs `BEGIN`)."""
        import psycopg

        return psycopg.connect(target, autocommit=True)

    def close(self) -> None:
        for queue in self.opened:
            try:
                queue.close()
            except Exception:
                pass

    def check(self) -> None:
        for url in self.targets.values():
            check_pg_invariants(url)

    def cleanup(self) -> None:
        """Drop the test's schemas (after close and check)."""
        for schema in self.schemas:
            pgcluster.drop_schema(self.server.url, schema)


STORES: dict[str, Callable[..., Any]] = {"sqlite": SqliteStore, "postgres": PostgresStore}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """One store per parameter id ("postgres", "sqlite"); after the test it closes its queues
    and checks them."""
    backend = STORES[request.param](tmp_path, request)
    yield backend
    backend.close()
    try:
        backend.check()
    finally:
        getattr(backend, "cleanup", lambda: None)()


@pytest.fixture
def target(store: Any) -> Any:
    """The place the test's queue lives (what `fairq.Queue(...)` and `fairq --db` are given)."""
    return store.target()


@pytest.fixture
def make_queue(store: Any, target: Any) -> Callable[..., fairq.Queue]:
    """Open a Queue on the test's target (or `at=` another one) with short settings: a lease of
    5 logical seconds, 3 claims per round, backoff 2 then 4 (cap 8) without jitter. The store
    closes it after the test."""

    def make(*, at: Any = None, **kw: Any) -> fairq.Queue:
        return store.open(target if at is None else at, **{**SHORT_SETTINGS, **kw})

    return make


@pytest.fixture
def q(make_queue: Callable[..., fairq.Queue]) -> fairq.Queue:
    return make_queue()


@pytest.fixture
def db_path() -> None:
    pytest.fail("a promise test names its store through `target`, not a file path")
