"""A PostgreSQL database whose default collation is not byte order (an ICU
locale) still lists flows in byte order of their names, as SQLite does, so
the console's pages go the same way on both stores."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

import fairq
from pgcluster import Server, require_psycopg
from pgops import with_database

psycopg = require_psycopg()

NAMES = ["b", "B", "a", "Z", "é", "e", "_x", "10", "9"]


@pytest.fixture
def icu_url(pg_server: Server) -> Iterator[str]:
    """A fresh database collating by the ICU locale en-US (a before B before b)."""
    name = f"icu_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server.url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' "
                      "LOCALE 'C.UTF-8'")  # a generated identifier: cannot be bound
    try:
        yield with_database(pg_server.url, name)
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def listed(q: fairq.Queue, page: int) -> list[str]:
    names: list[str] = []
    after = None
    while batch := q.flows(after=after, limit=page):
        names += [f.name for f in batch]
        after = batch[-1].name
    return names


def test_flows_list_in_byte_order_on_an_icu_database_as_on_sqlite(icu_url: str, tmp_path: Path) -> None:
    with psycopg.connect(icu_url) as conn:
        assert conn.execute("SELECT 'B' < 'a' COLLATE \"default\"").fetchone()[0] is False  # not byte order
    with fairq.Queue(icu_url, clock="model") as pg, fairq.Queue(tmp_path / "q.db") as lite:
        for q in (pg, lite):
            q.enqueue_many([{"event_id": f"e-{name}", "body": {}, "flow": name} for name in NAMES])
        expected = sorted(NAMES, key=lambda n: n.encode())
        assert listed(lite, 100) == expected
        assert listed(pg, 100) == expected
        assert listed(pg, 2) == expected  # the pages resume after a name in the same order
