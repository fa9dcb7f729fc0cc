"""Shared fixtures: queues on real SQLite files in tmp_path (the invariant recount runs after each
test that opened one), and a fairq HTTP server on a loopback port with a hand-moved clock; test
folders on a memory filesystem when the machine has one with room, and one bytecode cache for the
child processes.

Shared helper functions live in tests/helpers.py; the promise suite's store-parametrised
fixtures live in tests/contract/conftest.py."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq
from fairq.http.server import Server
from helpers import SHORT_SETTINGS, TOKEN, Clock, check_invariants, running
import pgcluster


# Where the test folders (tmp_path) go when nobody chose: a memory filesystem with room, if there is
# one. Every commit syncs the file (synchronous=FULL), and the suite commits tens of thousands of
# times: about 0.5 ms each on a virtual disk, nothing on tmpfs. What a test proves does not depend
# on the disk (crash tests kill processes; the small-filesystem tests mount their own tmpfs).
MEMORY_FS, MEMORY_FS_ROOM = Path("/dev/shm"), 2 << 30


def pytest_configure(config: pytest.Config) -> None:
    chosen = config.option.basetemp or any(v in os.environ for v in ("PYTEST_DEBUG_TEMPROOT", "TMPDIR"))
    if chosen or not (MEMORY_FS.is_dir() and os.access(MEMORY_FS, os.W_OK)):
        return
    if shutil.disk_usage(MEMORY_FS).free >= MEMORY_FS_ROOM:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY_FS)  # read by pytest's tmp_path_factory


@pytest.fixture(scope="session", autouse=True)
def child_processes_share_bytecode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """With PYTHONDONTWRITEBYTECODE set, each of the suite's few hundred child processes (`fairq`,
    workers, examples) would compile fairq from source again (about 0.1 s of CPU each). They share
    one bytecode cache in this session's temporary folder instead (the xdist workers one between
    them); nothing is written into the source tree. Set per test session, not before the xdist
    workers start: they would compile pytest and its plugins into it."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or "PYTHONPYCACHEPREFIX" in os.environ:
        yield
        return
    session = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        session = session.parent  # the workers' folders are popen-gw0, popen-gw1, ... in it
    saved = os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = str(session / "bytecode")
    try:
        yield
    finally:
        del os.environ["PYTHONPYCACHEPREFIX"]
        os.environ["PYTHONDONTWRITEBYTECODE"] = saved


# Modules whose tests run longest (the crash soak, the package build, the docs' examples) run
# first: with `-n 2`, a long test started last keeps one worker busy after the other has finished.
FIRST = ("test_soak.py", "test_package.py", "test_docs.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: otherwise in file order


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
def own_cluster() -> Iterator[pgcluster.Cluster]:
    """A started throwaway cluster of the test's own, to stop and start at will; removed
    after it. No server binaries: the test fails when CI=true, else it is skipped."""
    pgcluster.require_psycopg()
    if not pgcluster.available():
        if os.environ.get("CI") == "true":
            pytest.fail(pgcluster.HOW_TO)
        pytest.skip(pgcluster.HOW_TO)
    with pgcluster.cluster() as cluster:
        yield cluster


@pytest.fixture(params=["sqlite", "postgres"])
def either_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Where a queue lives, once per store: a SQLite file, or a fresh schema on
    the session's PostgreSQL (for tests outside tests/contract/ that run on both)."""
    if request.param == "sqlite":
        yield tmp_path / "queue.db"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def pg_url(pg_server: pgcluster.Server) -> Iterator[str]:
    """A URL whose connections use a fresh, empty schema (dropped after the test)."""
    name, url = pgcluster.fresh_schema(pg_server.url)
    yield url
    pgcluster.drop_schema(pg_server.url, name)
