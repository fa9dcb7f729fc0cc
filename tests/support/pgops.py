"""A fresh database of its own on the session's PostgreSQL server (the
pg_server fixture of tests/conftest.py, tests/support/pgcluster.py), for tests
and benchmarks that count a database's connections or need whole databases.
"""

from __future__ import annotations

import contextlib
import secrets
import urllib.parse
from collections.abc import Iterator


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
