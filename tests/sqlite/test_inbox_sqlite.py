"""The Inbox in a SQLite file: beside the application's own tables, refused when a newer fairq
wrote it, and an apply that ends the transaction writes no receipt."""

from __future__ import annotations

import sqlite3

import pytest

import fairq


@pytest.fixture
def effects_db(tmp_path):
    """A receiver's database with the application's own effects table."""
    path = tmp_path / "receiver.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE effects (n INTEGER)")
    conn.commit()
    conn.close()
    return path


def test_the_inbox_lives_beside_the_applications_own_tables(tmp_path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with fairq.Inbox(path) as inbox:
        inbox.receive("e1", None, 1, {})
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    assert {"orders", "fairq_receipt", "fairq_inbox_meta"} <= names
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    conn.close()


def test_an_inbox_written_by_a_newer_fairq_is_refused(tmp_path) -> None:
    path = tmp_path / "receiver.db"
    fairq.Inbox(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE fairq_inbox_meta SET value = 99 WHERE key = 'version'")
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="newer"):
        fairq.Inbox(path)


@pytest.mark.parametrize("ending", ["COMMIT", "ROLLBACK"])
def test_an_apply_that_ends_the_transaction_writes_no_receipt(effects_db, ending: str) -> None:
    path = effects_db
    with fairq.Inbox(path) as inbox:
        def apply(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO effects VALUES (1)")
            c.execute(ending)

        with pytest.raises(fairq.UsageError, match="tried to end the transaction it runs in"):
            inbox.receive("e1", "F", 1, {}, apply=apply)
        assert inbox._store.db.conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 0  # refused: not written
        # No receipt: a redelivery is accepted and its effect applied, not a DUPLICATE.
        assert inbox.received() == 0
        assert inbox.receive("e1", "F", 1, {}) is fairq.Receipt.ACCEPTED
