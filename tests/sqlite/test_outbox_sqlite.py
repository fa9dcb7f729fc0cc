"""Outbox on SQLite: the application's sqlite3 connection in any transaction mode, on the
queue's file by any path, refused when it is not usable; failures injected by TEMP triggers
undo only fairq's own writes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import fairq
from helpers import inject, place_order


@pytest.fixture
def app(db_path: Path, q: fairq.Queue) -> Iterator[sqlite3.Connection]:
    """The application's own connection to the queue's file, with its own table."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, cents INTEGER NOT NULL CHECK (cents > 0))")
    yield conn
    conn.close()


def orders(db_path: Path) -> list:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("SELECT id, cents FROM orders ORDER BY id").fetchall()
    finally:
        conn.close()


def test_a_failing_event_insert_leaves_no_business_row(q: fairq.Queue, app, db_path) -> None:
    inject(app, "event", "INSERT")  # a TEMP trigger on the application's connection
    with pytest.raises(fairq.StoreError, match="injected failure"):
        place_order(q, app, "o1", 500)
    assert orders(db_path) == [] and q.get("paid-o1") is None


def test_fairq_never_commits_the_applications_transaction(q: fairq.Queue, app, db_path) -> None:
    app.execute("BEGIN IMMEDIATE")
    app.execute("INSERT INTO orders VALUES ('o1', 500)")
    q.enqueue_many([("paid-o1", {"n": 1}), ("paid-o2", {"n": 2}, "F")], conn=app, now=1)
    assert app.in_transaction
    assert q.get("paid-o1") is None  # another connection cannot see it yet
    assert app.execute("SELECT count(*) FROM event").fetchone()[0] == 2  # the application can
    app.execute("ROLLBACK")
    assert q.events() == [] and orders(db_path) == []


def test_a_failed_call_undoes_only_its_own_writes(q: fairq.Queue, app, db_path) -> None:
    # The clock row is written last: the events are already inserted when it
    # fails, and must be undone, while the application's row stays its to decide.
    inject(app, "queue_state", "UPDATE")
    app.execute("BEGIN IMMEDIATE")
    app.execute("INSERT INTO orders VALUES ('o1', 500)")
    with pytest.raises(fairq.StoreError, match="injected failure"):
        q.enqueue("paid-o1", {}, flow="F", conn=app, now=1)
    assert app.in_transaction
    assert app.execute("SELECT count(*) FROM event").fetchone()[0] == 0
    app.execute("COMMIT")  # an application that carries on anyway commits no half of a call
    assert orders(db_path) == [("o1", 500)] and q.events() == []


def test_the_python_sqlite3_default_transaction_handling_works_too(q: fairq.Queue, db_path) -> None:
    conn = sqlite3.connect(db_path)  # legacy isolation_level="": DML opens a transaction
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE ledger (id TEXT PRIMARY KEY)")
    with conn:  # commits on success, rolls back on an exception
        conn.execute("INSERT INTO ledger VALUES ('o1')")
        q.enqueue("paid-o1", {"x": 1}, conn=conn, now=1)
    assert conn.row_factory is sqlite3.Row  # restored after the call
    assert q.get("paid-o1").state is fairq.State.READY
    with pytest.raises(fairq.Conflict), conn:
        conn.execute("INSERT INTO ledger VALUES ('o2')")
        q.enqueue("paid-o1", {"x": 2}, conn=conn, now=1)
    assert [tuple(r) for r in conn.execute("SELECT id FROM ledger")] == [("o1",)]
    conn.close()


def test_a_connection_outside_a_transaction_is_refused(q: fairq.Queue, app) -> None:
    with pytest.raises(fairq.InvalidInput, match="not inside a transaction") as refused:
        q.enqueue("x", {}, conn=app, now=1)
    assert refused.value.field == "conn"
    assert not app.in_transaction and q.events() == []


def test_a_connection_to_another_file_is_refused(q: fairq.Queue, tmp_path) -> None:
    for other in (sqlite3.connect(tmp_path / "other.db", isolation_level=None),
                  sqlite3.connect(":memory:", isolation_level=None)):
        other.execute("BEGIN")
        with pytest.raises(fairq.InvalidInput, match="not on the queue's file") as refused:
            q.enqueue("x", {}, conn=other, now=1)
        assert refused.value.field == "conn" and other.in_transaction
        other.close()
    assert q.events() == []


def test_the_same_file_by_another_path_is_accepted(q: fairq.Queue, db_path, tmp_path) -> None:
    link = tmp_path / "link.db"
    link.symlink_to(db_path)
    conn = sqlite3.connect(link, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    q.enqueue("x", {}, conn=conn, now=1)
    conn.execute("COMMIT")
    conn.close()
    assert q.get("x") is not None


@pytest.mark.parametrize("conn", ["queue.db", object(), 3])
def test_something_that_is_not_a_connection_is_refused(q: fairq.Queue, conn) -> None:
    with pytest.raises(fairq.InvalidInput, match="must be a sqlite3.Connection"):
        q.enqueue("x", {}, conn=conn, now=1)


def test_a_closed_connection_is_refused(q: fairq.Queue, db_path) -> None:
    conn = sqlite3.connect(db_path)
    conn.close()
    with pytest.raises(fairq.InvalidInput, match="conn: is not usable"):
        q.enqueue("x", {}, conn=conn, now=1)
