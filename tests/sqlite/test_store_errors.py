"""Every failure a caller can meet is a typed fairq error that names its
argument or says what happened to the file and what to do."""

from __future__ import annotations

import sqlite3

import pytest

import fairq
from helpers import cli


def test_a_busy_timeout_past_sqlites_int_milliseconds_is_refused_naming_it(db_path) -> None:
    with pytest.raises(fairq.InvalidInput, match="busy_timeout.*2147483.647") as info:
        fairq.Queue(db_path, busy_timeout=2_147_484.0)
    assert info.value.field == "busy_timeout"
    assert not db_path.exists()
    with fairq.Queue(db_path, busy_timeout=2_147_483.647) as q:
        q.enqueue("x", {}, now=0)  # the largest accepted timeout works


@pytest.mark.parametrize("path", [None, 123, "q\x00.db"], ids=["None", "int", "NUL"])
def test_a_path_that_is_not_a_file_name_is_refused_naming_path(path) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(path)
    assert info.value.field == "path"


def test_enqueue_many_of_a_non_iterable_is_refused_naming_items(q) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        q.enqueue_many(5)
    assert info.value.field == "items"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, "12", -1.0],
                         ids=["nan", "inf", "None", "str", "negative"])
def test_a_clock_returning_no_usable_time_is_refused_naming_clock(make_queue, value) -> None:
    q = make_queue(clock=lambda: value)
    with pytest.raises(fairq.InvalidInput) as info:
        q.enqueue("x", {})
    assert info.value.field == "clock"
    assert q.get("x") is None


def test_a_clock_that_is_not_callable_is_refused_naming_clock(db_path) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(db_path, clock=12.0)
    assert info.value.field == "clock"


@pytest.mark.parametrize("call", [
    lambda q: q.enqueue("x", {}, now=1), lambda q: q.claim(now=1), lambda q: q.stats(now=1),
    lambda q: q.get("x"), lambda q: q.tick(now=1), lambda q: q.schedules.list(),
], ids=["enqueue", "claim", "stats", "get", "tick", "schedules.list"])
def test_a_call_on_a_closed_queue_is_a_usage_error(db_path, call) -> None:
    q = fairq.Queue(db_path)
    q.close()
    with pytest.raises(fairq.UsageError, match="closed"):
        call(q)


def test_a_full_disk_is_disk_full_and_writes_nothing(q) -> None:
    q._store.db.conn.execute("PRAGMA max_page_count = 40")  # the file may not grow past 40 pages
    stored = 0
    with pytest.raises(fairq.DiskFull, match="free space") as info:
        for stored in range(1000):
            q.enqueue(f"e{stored}", {"pad": "x" * 3000}, now=0)
    assert isinstance(info.value, fairq.StoreError)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert q.get(f"e{stored}") is None
    assert q.stats(now=0).counts["ready"] == stored


def test_a_file_that_cannot_be_written_is_read_only(q) -> None:
    # Tests run as root, which ignores file modes; the connection is made read-only instead,
    # so SQLite answers SQLITE_READONLY as it does for a read-only file or filesystem
    # (test_filesystems mounts a real read-only one where that is allowed).
    q._store.db.conn.execute("PRAGMA query_only = ON")
    with pytest.raises(fairq.ReadOnly, match="cannot be written") as info:
        q.enqueue("x", {}, now=0)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def damaged(path) -> None:
    with fairq.Queue(path) as q:
        q.enqueue_many([(f"e{i}", {"pad": "x" * 500}, "A") for i in range(100)], now=0)
    with open(path, "r+b") as f:  # page 1 (the header) stays; the pages after it are garbage
        f.seek(4096)
        f.write(b"\xff" * 16384)


def test_a_damaged_file_is_corrupt(db_path) -> None:
    damaged(db_path)
    with pytest.raises(fairq.Corrupt, match="damaged.*backup") as info:
        with fairq.Queue(db_path, readonly=True) as q:
            q.stats()
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


def test_status_on_a_damaged_file_says_so_without_a_traceback(tmp_path) -> None:
    damaged(tmp_path / "q.db")
    done = cli("--db", "q.db", "status", cwd=tmp_path)
    assert done.returncode == 1
    assert "damaged" in done.stderr and "backup" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_untyped_database_error_reaches_a_cli_user_as_one_line(tmp_path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue("x", {}, now=0)
    conn = sqlite3.connect(tmp_path / "q.db")
    conn.execute("CREATE TRIGGER closed BEFORE INSERT ON event BEGIN SELECT RAISE(ABORT, 'closed for the night'); END")
    conn.commit()
    conn.close()
    (tmp_path / "e.jsonl").write_text('{"event_id": "y", "body": {}}\n')
    done = cli("--db", "q.db", "enqueue", "e.jsonl", cwd=tmp_path)
    assert done.returncode == 1
    assert "closed for the night" in done.stderr and "Traceback" not in done.stderr
