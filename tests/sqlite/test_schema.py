"""The file is marked, versioned, STRICT, checked; foreign files are refused."""

from __future__ import annotations

import sqlite3

import pytest

import fairq
from fairq.stores.sqlite import schema as migrate
from fairq.stores.sqlite.connection import check_sqlite_version, statements, read_script


def raw(path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def test_a_fresh_file_is_marked_versioned_and_in_wal_mode(q: fairq.Queue, db_path) -> None:
    conn = raw(db_path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == migrate.APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrate.LATEST
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_every_table_is_strict(q: fairq.Queue, db_path) -> None:
    conn = raw(db_path)
    tables = conn.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main' "
                          "AND name NOT LIKE 'sqlite_%'").fetchall()
    conn.close()
    assert {name for name, _ in tables} == set(migrate.OWN_TABLES)
    assert all(strict == 1 for _, strict in tables)


@pytest.mark.parametrize("synchronous, level", [("full", 2), ("normal", 1)])
def test_durability_settings_reach_the_connection(make_queue, synchronous, level) -> None:
    q = make_queue(synchronous=synchronous)
    conn = q._store.db.conn
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == level
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


@pytest.mark.parametrize("sql", [
    "UPDATE event SET state = 'done'",
    "UPDATE event SET state = 'inflight'",  # inflight needs a lease_until
    "UPDATE event SET lease_until_ms = 99",  # a ready event holds no lease
    "UPDATE event SET attempts = 5",  # more than lifetime_attempts
    "UPDATE event SET seq = 'two'",  # STRICT: INTEGER only
    "UPDATE flow SET weight = 0",
    "UPDATE event SET dispatch_ms = 7",  # a head's dispatch time is its next_at
    "UPDATE event SET pass = NULL",  # a head without a rotation place
    "UPDATE queue_state SET ready_n = -1",
    "UPDATE queue_state SET tail = -1",
    "INSERT INTO audit (event_id, action, at_ms) VALUES ('x', 'shrug', 0)",
    "INSERT INTO event (event_id, flow_id, seq, body, created_ms, next_at_ms, due_ms) "
    "VALUES ('orphan', 999, 1, '{}', 0, 0, 0)",  # foreign key
])
def test_check_constraints_refuse_impossible_rows(q: fairq.Queue, sql) -> None:
    q.enqueue("x", {}, flow="F", now=0)
    conn = q._store.db.conn
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(sql)


def test_a_reopened_file_keeps_its_events(db_path) -> None:
    with fairq.Queue(db_path) as q:
        q.enqueue("x", {"v": 1}, now=0)
    with fairq.Queue(db_path) as q:
        assert q.get("x").body == {"v": 1}


def test_a_file_of_another_application_is_refused_untouched(db_path) -> None:
    conn = raw(db_path)
    conn.execute("PRAGMA application_id = 12345")
    conn.execute("CREATE TABLE mine (x)")
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="another application"):
        fairq.Queue(db_path)
    conn = raw(db_path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_schema")] == ["mine"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


def test_a_versioned_file_without_our_mark_is_refused(db_path) -> None:
    conn = raw(db_path)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="another application"):
        fairq.Queue(db_path)


def test_a_file_that_is_not_sqlite_is_refused(db_path) -> None:
    db_path.write_bytes(b"this is a text file, not a database" * 100)
    with pytest.raises(fairq.SchemaError):
        fairq.Queue(db_path)


def test_a_file_that_cannot_be_opened_is_refused_saying_why(tmp_path) -> None:
    with pytest.raises(fairq.SchemaError, match="cannot open"):
        fairq.Queue(tmp_path / "no-such-folder" / "q.db")


def test_a_newer_schema_is_refused(db_path) -> None:
    fairq.Queue(db_path).close()
    conn = raw(db_path)
    conn.execute(f"PRAGMA user_version = {migrate.LATEST + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="newer"):
        fairq.Queue(db_path)


def test_an_unmarked_file_with_the_applications_tables_is_adopted(db_path) -> None:
    conn = raw(db_path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    with fairq.Queue(db_path) as q:
        q.enqueue("x", {}, now=0)
    conn = raw(db_path)
    assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    conn.close()


def test_an_unmarked_file_with_a_clashing_table_name_is_refused(db_path) -> None:
    conn = raw(db_path)
    conn.execute("CREATE TABLE event (what TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="event"):
        fairq.Queue(db_path)


def test_an_old_sqlite_is_refused_naming_both_versions() -> None:
    with pytest.raises(fairq.SchemaError) as info:
        check_sqlite_version((3, 36, 2))
    assert "3.37.0" in str(info.value) and "3.36.2" in str(info.value)
    check_sqlite_version((3, 37, 0))


def test_every_migration_step_up_to_latest_exists() -> None:
    assert set(migrate.MIGRATIONS) == set(range(2, migrate.LATEST + 1))
    for name in migrate.MIGRATIONS.values():
        assert statements(read_script(name))


def test_the_schema_script_splits_into_whole_statements() -> None:
    parts = statements(read_script("queue.sql"))
    assert all(sqlite3.complete_statement(p + ";") or sqlite3.complete_statement(p) for p in parts)
    assert any("CREATE INDEX event_rotation" in p for p in parts)


def test_a_held_write_lock_past_the_busy_timeout_raises_busy(make_queue, db_path) -> None:
    q = make_queue(busy_timeout=0.2)
    q.enqueue("x", {}, now=0)
    blocker = raw(db_path)
    blocker.isolation_level = None
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(fairq.Busy) as info:
            q.claim(now=1)
        assert not isinstance(info.value, sqlite3.Error)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert q.get("x").state is fairq.State.READY
    assert q.claim(now=1).event_id == "x"
