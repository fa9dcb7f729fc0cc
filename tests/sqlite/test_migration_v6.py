"""Schema step 6: the queue's one state row lives in table queue_state.

tests/fixtures/schema_v5.sql is queue.sql as it was at user_version 5 (the
row was then in table clock); it never changes. A version 5 file upgrades to
exactly the schema a fresh file gets, keeping every value of the row.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import fairq
from fairq.kernel import policy
from fairq.stores.sqlite import schema as migrate
from helpers import FIXTURES


STATE = ("now_ms, vtime, tail, turn, ready_n, inflight_n, acked_n, quarantined_n, enqueued_total, "
         "claimed_total, expired_total, acked_total, retried_total, quarantined_total, redriven_total, claim_lag")


# One first claim in the lowest bucket of the claim lag histogram.
LAG = "[" + ",".join(["1"] + ["0"] * len(policy.CLAIM_LAG_BOUNDS_MS)) + "]"


def schema(path: Path) -> dict[str, object]:
    """What must match between a migrated and a fresh file: the schema objects
    (SQL without comments or layout) and the file's marks."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema "
                            "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
        return {
            "objects": [(t, n, tbl, None if sql is None else " ".join(re.sub(r"--[^\n]*", "", sql).split()))
                        for t, n, tbl, sql in rows],
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "application_id": conn.execute("PRAGMA application_id").fetchone()[0],
        }
    finally:
        conn.close()


def build_v5(path: Path) -> None:
    """A version 5 file as an older fairq left it: one ready event of flow A,
    one acked before it, and a state row whose every value is its own."""
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "schema_v5.sql").read_text(encoding="utf-8"))
    conn.executescript("""
        INSERT INTO flow (flow_id, name, next_seq) VALUES (1, 'A', 3);
        INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms,
                           pass, turn, dispatch_ms, runnable, generation, attempts, lifetime_attempts, settled_ms)
        VALUES ('A1', 1, 1, '{"n":1}', 'acked', 0, 0, NULL, NULL, NULL, NULL, 0, 1, 1, 1, 500);
        INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms,
                           pass, turn, dispatch_ms, runnable)
        VALUES ('A2', 1, 2, '{"n":2}', 'ready', 0, 0, 0, 7, 9, 0, 0);
        UPDATE clock SET now_ms = 1000, vtime = 6, tail = 7, turn = 9, ready_n = 1, acked_n = 1,
               enqueued_total = 2, claimed_total = 1, expired_total = 0, acked_total = 1,
               retried_total = 0, quarantined_total = 0, redriven_total = 0,
               claim_lag = :lag;
    """.replace(":lag", repr(LAG)))
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()


def read(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_version_5_file_migrates_to_exactly_the_fresh_schema(tmp_path: Path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    build_v5(old)
    fairq.Queue(old).close()
    fairq.Queue(fresh).close()
    migrated = schema(old)
    assert migrated == schema(fresh)
    assert migrated["user_version"] == migrate.LATEST == 10
    tables = [name for kind, name, _, _ in migrated["objects"] if kind == "table"]
    assert "queue_state" in tables and "clock" not in tables


def test_the_upgrade_keeps_every_value_of_the_state_row(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    build_v5(path)
    before = read(path, f"SELECT {STATE} FROM clock")
    fairq.Queue(path).close()
    assert read(path, f"SELECT {STATE} FROM queue_state") == before
    assert read(path, "SELECT id FROM queue_state") == [(1,)]


def test_a_migrated_queue_goes_on_where_it_stood(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    build_v5(path)
    with fairq.Queue(path) as q:
        stats = q.stats(now=2)
        assert stats.counts == {"ready": 1, "inflight": 0, "acked": 1, "quarantined": 0, "discarded": 0}
        assert stats.totals["enqueued"] == 2 and stats.totals["acked"] == 1
        with pytest.raises(fairq.ClockError):
            q.claim(now=0.5)  # the stored clock (1 s) came over
        lease = q.claim(now=2)
        assert lease is not None and lease.event_id == "A2"
        q.ack(lease, now=2)
        assert q.stats(now=2).totals["acked"] == 2


def test_the_upgrade_refuses_an_application_table_named_queue_state(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    build_v5(path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE queue_state (note TEXT)")  # the application's own table
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="queue_state"):
        fairq.Queue(path)
    assert read(path, "PRAGMA user_version") == [(5,)]
    assert read(path, "SELECT now_ms FROM clock") == [(1000,)]


def test_a_version_5_file_is_not_read_as_current(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    build_v5(path)
    with pytest.raises(fairq.SchemaError, match="older"):
        fairq.Queue(path, readonly=True)
    assert read(path, "PRAGMA user_version") == [(5,)]
