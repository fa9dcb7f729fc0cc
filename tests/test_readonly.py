"""Refusing is not writing: a refused file, and every file a read-only command
looks at, keeps its bytes; a missing file is not created."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import fairq
from helpers import build_v1, cli

# Every command that only reads, with the arguments it needs.
READING_COMMANDS = [
    ("status",), ("events",), ("show", "x"), ("explain", "A"), ("metrics",), ("schedules", "list"),
]


def snapshot(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def application_file(path: Path) -> None:
    """Another application's unmarked SQLite file, in rollback-journal mode."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
    conn.execute("INSERT INTO orders (total) VALUES (12)")
    conn.commit()
    conn.close()


def test_an_unmarked_file_with_a_table_named_event_is_refused_before_any_write(db_path) -> None:
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE event (what TEXT)")
    conn.commit()
    conn.close()
    before = db_path.read_bytes()
    with pytest.raises(fairq.SchemaError, match="event"):
        fairq.Queue(db_path)
    assert db_path.read_bytes() == before
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


@pytest.mark.parametrize("command", READING_COMMANDS, ids=lambda c: " ".join(c))
def test_a_reading_command_on_another_applications_file_refuses_and_leaves_it_as_it_was(tmp_path, command) -> None:
    path = tmp_path / "other.db"
    application_file(path)
    before = path.read_bytes()
    done = cli("--db", str(path), *command, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "not a fairq database" in done.stderr and "Traceback" not in done.stderr
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_schema")] == ["orders"]
    conn.close()


@pytest.mark.parametrize("command", READING_COMMANDS, ids=lambda c: " ".join(c))
def test_a_reading_command_on_a_missing_file_does_not_create_it(tmp_path, command) -> None:
    done = cli("--db", "missing.db", *command, cwd=tmp_path)
    assert done.returncode == 1
    assert "no fairq database at missing.db; run `fairq init`" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_status_on_an_empty_file_refuses_and_leaves_it_empty(tmp_path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    done = cli("--db", str(path), "status", cwd=tmp_path)
    assert done.returncode == 1 and "not a fairq database" in done.stderr
    assert path.read_bytes() == b""


def test_a_read_only_queue_refuses_an_older_schema_without_upgrading_it(db_path) -> None:
    build_v1(db_path)
    before = db_path.read_bytes()
    with pytest.raises(fairq.SchemaError, match="older"):
        fairq.Queue(db_path, readonly=True)
    assert db_path.read_bytes() == before
    with fairq.Queue(db_path) as q:  # opening for writes upgrades it
        assert q.get("A1") is not None


def test_a_read_only_queue_on_a_missing_file_refuses_and_creates_nothing(tmp_path) -> None:
    with pytest.raises(fairq.SchemaError, match="no fairq database at"):
        fairq.Queue(tmp_path / "nothing.db", readonly=True)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_queue_reads_but_never_writes(db_path) -> None:
    with fairq.Queue(db_path) as q:
        q.enqueue("x", {"v": 1}, flow="A", now=5)
    before = db_path.read_bytes()
    with fairq.Queue(db_path, readonly=True) as ro:
        assert ro.get("x").body == {"v": 1}
        assert ro.stats(now=9).counts["ready"] == 1
        assert ro.why_blocked("A", now=9).why == "ready"
        assert ro.schedules.list() == []
        with pytest.raises(fairq.ReadOnly, match="read-only"):
            ro.enqueue("y", {}, now=6)
        with pytest.raises(fairq.ReadOnly):
            ro.claim(now=6)
        with pytest.raises(fairq.ReadOnly):
            ro.tick(now=6)
    assert db_path.read_bytes() == before


def test_a_read_only_queue_sees_what_a_writer_commits(db_path) -> None:
    with fairq.Queue(db_path) as writer, fairq.Queue(db_path, readonly=True) as reader:
        writer.enqueue("x", {}, now=1)
        assert reader.get("x") is not None
        writer.enqueue("y", {}, now=2)
        assert reader.get("y") is not None


def test_status_on_a_fairq_file_still_works_and_does_not_write(tmp_path) -> None:
    path = tmp_path / "q.db"
    with fairq.Queue(path) as q:
        q.enqueue("x", {}, now=1)
    before = path.read_bytes()
    done = cli("--db", str(path), "status", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == before
