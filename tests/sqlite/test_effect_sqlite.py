"""A settle effect gets the queue's own sqlite3 connection: ending its transaction is refused,
changing its factories does not break the queue."""

from __future__ import annotations

import sqlite3

import pytest

import fairq


@pytest.fixture
def shop(q: fairq.Queue, db_path) -> fairq.Queue:
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE effects (event_id TEXT PRIMARY KEY, amount INTEGER NOT NULL)")
    conn.commit()
    conn.close()
    q.enqueue("E0001", {"amount": 10000}, now=0)
    return q


def effects(path) -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT event_id, amount FROM effects").fetchall()
    finally:
        conn.close()


def insert_effect(lease: fairq.Lease):
    def effect(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO effects VALUES (:id, :amount)",
                     {"id": lease.event_id, "amount": lease.body["amount"]})
    return effect


@pytest.mark.parametrize("ending", ["COMMIT", "ROLLBACK", "with"])
def test_an_effect_that_ends_the_transaction_is_refused_before_the_ack(shop: fairq.Queue, db_path,
                                                                       ending: str) -> None:
    lease = shop.claim(now=0)

    def effect(conn: sqlite3.Connection) -> None:
        if ending == "with":
            with conn:  # commits on the way out
                insert_effect(lease)(conn)
        else:
            insert_effect(lease)(conn)
            conn.execute(ending)

    with pytest.raises(fairq.UsageError, match="tried to end the transaction it runs in"):
        shop.ack(lease, effect=effect, now=1)
    # The ending was refused: nothing of the call was written, the effect's rows
    # neither; the event is still held, the lease still good.
    info = shop.get("E0001")
    assert info.state is fairq.State.INFLIGHT and info.generation == lease.generation
    assert effects(db_path) == []
    assert shop.ack(lease, now=2).state is fairq.State.ACKED


def _rows_as_dicts(cursor: sqlite3.Cursor, row: tuple) -> dict:
    return {column[0]: value for column, value in zip(cursor.description, row)}


@pytest.mark.parametrize("factory", [
    pytest.param(("row_factory", _rows_as_dicts), id="row_factory"),
    pytest.param(("text_factory", bytes), id="text_factory"),
])
def test_an_effect_that_changes_the_connections_factories_does_not_break_the_queue(
        shop: fairq.Queue, db_path, factory) -> None:
    name, value = factory
    lease = shop.claim(now=0)

    def effect(conn: sqlite3.Connection) -> None:
        insert_effect(lease)(conn)
        setattr(conn, name, value)

    assert shop.ack(lease, effect=effect, now=1).state is fairq.State.ACKED
    assert effects(db_path) == [("E0001", 10000)]
    # The same Queue goes on working: its connection has fairq's factories back.
    shop.enqueue("E0002", {"amount": 5}, now=2)
    again = shop.claim(now=2)
    assert again.event_id == "E0002" and again.body == {"amount": 5}
    assert shop.ack(again, now=3).state is fairq.State.ACKED
