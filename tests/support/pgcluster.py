"""A PostgreSQL server for the tests: the one FAIRQ_TEST_PG_URL names, or a
throwaway cluster started in a temporary folder for the test session.

A throwaway cluster (`Cluster`, also for a test or benchmark that stops and
starts a server of its own): `initdb` (found on PATH or under
/usr/lib/postgresql/*/bin; run as the `postgres` user through runuser when
the tests run as root) with trust auth, listening on 127.0.0.1 at a free port
with its socket in its data folder, fsync off unless asked (tests, never
benchmarks), max_connections 200; removed after use. Per test, a fresh schema
(`fresh_schema`): a queue lives in the URL's search_path, so isolating a test
costs one CREATE SCHEMA.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: What to do when no server can be had.
HOW_TO = ("PostgreSQL tests need a server: install PostgreSQL (e.g. `apt-get install postgresql`, which "
          "brings initdb) or set FAIRQ_TEST_PG_URL=postgresql://user@host:port/dbname")


def require_psycopg() -> Any:
    """The psycopg module for a PostgreSQL test module; without it the module is
    skipped (saying how to install it), or fails to collect when CI=true."""
    try:
        import psycopg
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        import pytest

        pytest.skip("PostgreSQL tests need psycopg 3: pip install -e '.[postgres]'", allow_module_level=True)
    return psycopg


def find_binary(name: str) -> str | None:
    """A PostgreSQL server binary on PATH or in the OS packages' folder."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> bool:
    """Can this machine run a throwaway cluster?"""
    return find_binary("initdb") is not None and find_binary("pg_ctl") is not None


class Cluster:
    """A throwaway PostgreSQL cluster in a temporary folder: init(), start(), stop(), remove()."""

    def __init__(self, *, fsync: bool = False, port: int | None = None) -> None:
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="fairq-pg-"))
        self.data = self.root / "data"
        self.fsync = fsync
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses root
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> Cluster:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(_binary("initdb"), "-D", str(self.data), "--auth=trust", "-U", "postgres", "-E", "UTF8",
                  "--no-instructions", *([] if self.fsync else ["--no-sync"]))
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.data}'\nfsync = {'on' if self.fsync else 'off'}\n"
                       "max_connections = 200\n")
        return self

    def start(self) -> None:
        self._run(_binary("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.root / "log"),
                  "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(_binary("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _binary(name: str) -> str:
    return find_binary(name) or name


@contextlib.contextmanager
def cluster(*, fsync: bool = False) -> Iterator[Cluster]:
    """A started throwaway cluster for the block, removed after it."""
    c = Cluster(fsync=fsync).init()
    try:
        c.start()
        yield c
    finally:
        c.remove()


@dataclass
class Server:
    """A reachable server: `url` names a database tests may create schemas in."""

    url: str
    cluster: Cluster | None = None  # the throwaway cluster, None for FAIRQ_TEST_PG_URL

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.remove()


def start() -> Server | None:
    """The server to test on, or None when there is none (no URL, no initdb)."""
    given = os.environ.get("FAIRQ_TEST_PG_URL")
    if given:
        return Server(given)
    if not available():
        return None
    started = Cluster().init()
    try:
        started.start()
    except BaseException:
        shutil.rmtree(started.root, ignore_errors=True)
        raise
    return Server(started.url, started)


def with_schema(url: str, schema: str) -> str:
    """The URL whose connections use `schema` (options=-csearch_path=...)."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    query = [(k, v) for k, v in query if k != "options"] + [("options", f"-csearch_path={schema}")]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def fresh_schema(url: str, prefix: str = "t") -> tuple[str, str]:
    """(a new empty schema's name, the URL that uses it)."""
    import psycopg

    name = f"fairq_{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return name, with_schema(url, name)


def drop_schema(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
