"""The outbox on PostgreSQL: an enqueue joins the application's open psycopg
transaction (a savepoint), and a connection it cannot join is refused."""

from __future__ import annotations

import sqlite3

import pytest

import fairq
from pgcluster import drop_schema, fresh_schema, require_psycopg

psycopg = require_psycopg()


def test_a_refused_enqueue_leaves_the_applications_transaction_usable(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q, psycopg.connect(pg_url) as app:
        app.execute("CREATE TABLE orders (id text PRIMARY KEY)")
        app.commit()
        q.enqueue("paid-1", {"order": 1})
        app.execute("INSERT INTO orders VALUES ('o1')")
        with pytest.raises(fairq.Conflict):
            q.enqueue("paid-1", {"order": 2}, conn=app)  # undone alone, at its savepoint
        q.enqueue("paid-2", {"order": 2}, conn=app)
        assert q.get("paid-2") is None  # not before the application commits
        app.commit()
        assert q.get("paid-2").body == {"order": 2}
        assert app.execute("SELECT id FROM orders").fetchall() == [("o1",)]


def test_connections_that_cannot_be_joined_are_refused(pg_url: str, pg_server, tmp_path) -> None:
    with fairq.Queue(pg_url) as q:
        with psycopg.connect(pg_url, autocommit=True) as idle:
            with pytest.raises(fairq.InvalidInput, match="not inside a transaction"):
                q.enqueue("e", {}, conn=idle)
        schema, elsewhere = fresh_schema(pg_server.url)
        try:
            with psycopg.connect(elsewhere) as other:
                other.execute("SELECT 1")
                with pytest.raises(fairq.InvalidInput, match="not on the queue's database and schema"):
                    q.enqueue("e", {}, conn=other)
        finally:
            drop_schema(pg_server.url, schema)
        lite = sqlite3.connect(tmp_path / "app.db")
        with pytest.raises(fairq.InvalidInput, match="psycopg.Connection"):
            q.enqueue("e", {}, conn=lite)
        lite.close()
        assert q.get("e") is None
