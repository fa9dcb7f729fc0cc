"""Shared fixtures: queues on real SQLite files in tmp_path (the invariant recount runs after each
test that opened one), and a fairq HTTP server on a loopback port with a hand-moved clock.

Shared helper functions live in tests/helpers.py; the promise suite's store-parametrised
fixtures live in tests/contract/conftest.py."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fairq
from fairq.http.server import Server
from helpers import SHORT_SETTINGS, TOKEN, Clock, check_invariants, running
import pgcluster


@pytest.fixture(autouse=True)
def root_logging_restored() -> Iterator[None]:
    """A command run in this process (`fairq work` configures the root logger for its stderr)
    leaves no handler behind to write to a stream a later test has closed."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


@pytest.fixture
def make_queue(db_path: Path) -> Iterator[Callable[..., fairq.Queue]]:
    opened: list[fairq.Queue] = []

    def make(**kw: object) -> fairq.Queue:
        q = fairq.Queue(db_path, **{**SHORT_SETTINGS, **kw})  # type: ignore[arg-type]
        opened.append(q)
        return q

    yield make
    for q in opened:
        try:
            q.close()
        except Exception:
            pass
    check_invariants(db_path)


@pytest.fixture
def q(make_queue: Callable[..., fairq.Queue]) -> fairq.Queue:
    return make_queue()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(make_queue, clock: Clock) -> Iterator[Server]:
    """A server whose Queue reads `clock`."""
    with running(make_queue(clock=clock)) as s:
        yield s


@pytest.fixture
def client(server: Server) -> fairq.Client:
    return fairq.Client(server.url, token=TOKEN, timeout=10)


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgcluster.Server]:
    """A PostgreSQL server for this test session (one per xdist worker): the one
    FAIRQ_TEST_PG_URL names, or a throwaway cluster started with initdb and
    stopped at the end. Neither available: the test fails when CI=true, else it
    is skipped with a message saying how to run it."""
    pgcluster.require_psycopg()
    try:
        server = pgcluster.start()
    except Exception as exc:  # initdb or pg_ctl failed: say so, with their output
        detail = getattr(exc, "stderr", b"") or b""
        message = f"could not start a PostgreSQL cluster: {exc} {detail.decode(errors='replace')[-500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    if server is None:
        if os.environ.get("CI") == "true":
            pytest.fail(pgcluster.HOW_TO)
        pytest.skip(pgcluster.HOW_TO)
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: pgcluster.Server) -> Iterator[str]:
    """A URL whose connections use a fresh, empty schema (dropped after the test)."""
    name, url = pgcluster.fresh_schema(pg_server.url)
    yield url
    pgcluster.drop_schema(pg_server.url, name)
