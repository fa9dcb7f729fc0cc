"""A PostgreSQL server for the tests: the one FAIRQ_TEST_PG_URL names, or a
throwaway cluster started in a temporary folder for the test session.

The cluster: `initdb` (found on PATH or under /usr/lib/postgresql/*/bin; run
as the `postgres` user through runuser when the tests run as root) with trust
auth, listening on 127.0.0.1 at a free port with its socket in its data
folder, fsync off (tests, never benchmarks), max_connections 200; stopped with
`pg_ctl -m fast stop` at the end of the session. Per test, a fresh schema
(`fresh_schema`): a queue lives in the URL's search_path, so isolating a test
costs one CREATE SCHEMA.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import uuid
from dataclasses import dataclass, field
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A reachable server: `url` names a database tests may create schemas in."""

    url: str
    data: str | None = None  # the throwaway cluster's folder, None for FAIRQ_TEST_PG_URL
    as_user: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.data is None:
            return
        pg_ctl = find_binary("pg_ctl")
        if pg_ctl:
            subprocess.run([*self.as_user, pg_ctl, "-D", self.data, "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=60, check=False)
        shutil.rmtree(os.path.dirname(self.data), ignore_errors=True)


def start() -> Server | None:
    """The server to test on, or None when there is none (no URL, no initdb)."""
    given = os.environ.get("FAIRQ_TEST_PG_URL")
    if given:
        return Server(given)
    initdb, pg_ctl = find_binary("initdb"), find_binary("pg_ctl")
    if not initdb or not pg_ctl:
        return None
    as_user: list[str] = []
    base = tempfile.mkdtemp(prefix="fairq-pg-")
    data = os.path.join(base, "data")
    if os.geteuid() == 0:  # initdb refuses root
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(base, "postgres")
    port = _free_port()
    # Throwaway and fast: trust auth, no fsync (tests only), a socket in the data folder.
    subprocess.run([*as_user, initdb, "-D", data, "--auth=trust", "-U", "postgres", "-E", "UTF8",
                    "--no-sync"], capture_output=True, timeout=120, check=True)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off -c max_connections=200"
    subprocess.run([*as_user, pg_ctl, "-D", data, "-o", options, "-l", os.path.join(data, "log"), "-w",
                    "start"], capture_output=True, timeout=120, check=True)
    return Server(f"postgresql://postgres@127.0.0.1:{port}/postgres", data, as_user)


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
