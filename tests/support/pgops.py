"""PostgreSQL for the operational tests: a fresh database per test on the shared
server, and a dedicated throwaway cluster a test may stop and start at will.

The shared server is the session's (the pg_server fixture of tests/conftest.py,
tests/support/pgcluster.py). A dedicated cluster runs
`initdb` and `pg_ctl` as the `postgres` user when this process is root
(initdb refuses root), on a loopback port of its own, with trust auth.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")
HOW_TO_RUN = ("install PostgreSQL (initdb, pg_ctl; e.g. apt-get install postgresql) to let the tests "
              "start a cluster of their own")


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` instead."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


@contextlib.contextmanager
def fresh_database(url: str, prefix: str = "pgops") -> Iterator[str]:
    """A new, empty database on the server at `url` for the block; dropped after it."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # a generated identifier: cannot be bound
    try:
        yield with_database(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> bool:
    """Can this machine run a throwaway cluster?"""
    return (BIN / "initdb").exists() or shutil.which("initdb") is not None


def _tool(name: str) -> str:
    found = BIN / name
    return str(found) if found.exists() else (shutil.which(name) or name)


class Cluster:
    """A throwaway PostgreSQL cluster in a temporary folder: init(), start(), stop(), remove().

    fsync is on unless fsync=False (a benchmark that claims durability keeps it on).
    """

    def __init__(self, *, fsync: bool = False, port: int | None = None) -> None:
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="fairq-pg-"))
        self.data = self.root / "data"
        self.fsync = fsync
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> Cluster:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(_tool("initdb"), "-D", str(self.data), "--auth=trust", "-U", "postgres", "-E", "UTF8",
                  "--no-instructions")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.data}'\nfsync = {'on' if self.fsync else 'off'}\n"
                       "max_connections = 200\n")
        return self

    def start(self) -> None:
        self._run(_tool("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.root / "log"), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(_tool("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def cluster(*, fsync: bool = False) -> Iterator[Cluster]:
    """A started throwaway cluster for the block, removed after it."""
    c = Cluster(fsync=fsync).init()
    try:
        c.start()
        yield c
    finally:
        c.remove()


def _pytest_fixture() -> object:
    import pytest

    @pytest.fixture
    def pg_db(request: pytest.FixtureRequest) -> Iterator[str]:
        """The URL of a fresh database of its own on the suite's PostgreSQL server (the
        session's pg_server), for tests that count a database's connections."""
        server = request.getfixturevalue("pg_server")
        with fresh_database(server.url) as db:
            yield db

    return pg_db


#: The fixture a test module takes with `from pgops import pg_db`.
pg_db = _pytest_fixture()
