"""Schedules in SQLite: CHECK constraints refuse impossible rows, and a tick reads due
schedules through an index."""

from __future__ import annotations

import sqlite3

import pytest


def test_the_schedule_table_refuses_impossible_rows(q, db_path) -> None:
    q.schedules.add("report", every=10, start=0)
    conn = sqlite3.connect(db_path)
    for sql in ("UPDATE schedule SET cron = '@daily'",  # both every and cron
                "UPDATE schedule SET misfire = 'later'",
                "UPDATE schedule SET misfire = 'skip'",  # skip needs a grace
                "UPDATE schedule SET tz = 'Europe/Berlin'",  # every= counts seconds
                "UPDATE schedule SET next_slot_ms = -1",  # before start
                "UPDATE schedule SET last_slot_ms = 100, next_slot_ms = 100",
                "UPDATE schedule SET paused = 2"):
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(sql)
    conn.close()


def test_a_tick_reads_due_schedules_through_their_index(q) -> None:
    for i in range(20):
        q.schedules.add(f"s{i}", every=10, start=1000 * i)
    statements: list[str] = []
    conn = q._store.db.conn
    conn.set_trace_callback(statements.append)
    q.tick(now=5)
    conn.set_trace_callback(None)
    due = next(s for s in statements if "FROM schedule" in s and "next_slot_ms <=" in s)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + due)]
    assert plan == ["SEARCH schedule USING INDEX schedule_due (next_slot_ms<?)"]
