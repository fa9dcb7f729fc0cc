"""The user_version ladder: a file made by an older fairq upgrades to exactly the
schema a fresh file gets, and keeps its events.

tests/fixtures/schema_v1.sql is queue.sql as it was at user_version 1,
schema_v2.sql as it was at 2, schema_v3.sql at 3 and schema_v4.sql at 4 (files made by earlier
builds of fairq carry those versions); they never change. Each later version adds a fixture of its
own.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import fairq
from fairq.stores.sqlite import schema as migrate
from helpers import FIXTURES, build_v1


def schema(path: Path) -> dict[str, object]:
    """What must match between a migrated and a fresh file: the schema objects
    (SQL without comments or layout) and the file's marks."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' "
            "ORDER BY type, name").fetchall()
        return {
            "objects": [(t, n, tbl, normalize(sql)) for t, n, tbl, sql in rows],
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "application_id": conn.execute("PRAGMA application_id").fetchone()[0],
        }
    finally:
        conn.close()


def normalize(sql: str | None) -> str | None:
    if sql is None:
        return None
    return " ".join(re.sub(r"--[^\n]*", "", sql).split())


def test_a_version_1_file_migrates_to_exactly_the_fresh_schema(tmp_path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    build_v1(old)
    fairq.Queue(old).close()
    fairq.Queue(fresh).close()
    migrated = schema(old)
    assert migrated == schema(fresh)
    assert migrated["user_version"] == migrate.LATEST == 10
    assert "schedule" in [name for _, name, _, _ in migrated["objects"]]


def test_events_stored_under_version_1_survive_the_upgrade(tmp_path) -> None:
    path = tmp_path / "old.db"
    build_v1(path)
    with fairq.Queue(path, lease_seconds=5) as q:
        assert q.get("A2").body == {"n": 2}
        assert q.stats(now=1).counts["ready"] == 3
        order = []
        while (lease := q.claim(now=1)) is not None:
            order.append(lease.event_id)
            q.ack(lease, now=1)
        assert order == ["A1", "u1", "A2"]
        q.schedules.add("report", every=10, start=0)
        assert [e.event_id for e in q.tick(now=1)] == ["report@1970-01-01T00:00:00Z"]


def test_the_upgrade_refuses_an_application_table_named_like_a_new_one(tmp_path) -> None:
    path = tmp_path / "old.db"
    build_v1(path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schedule (shift TEXT)")  # the application's own table
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="schedule"):
        fairq.Queue(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM event").fetchone()[0] == 3
    conn.close()


def test_every_step_names_the_tables_it_creates() -> None:
    for step, script in migrate.MIGRATIONS.items():
        text = (Path(migrate.__file__).parent / script).read_text(encoding="utf-8")
        created = re.findall(r"CREATE TABLE (\w+)", text)
        assert tuple(created) == migrate.STEP_TABLES[step]
        assert set(created) <= set(migrate.OWN_TABLES)
        assert set(migrate.REBUILT_TABLES.get(step, ())) <= set(created)


def test_a_version_2_file_migrates_to_exactly_the_fresh_schema_and_can_purge(tmp_path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    conn = sqlite3.connect(old)
    conn.executescript((FIXTURES / "schema_v2.sql").read_text(encoding="utf-8"))
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with fairq.Queue(old) as q:
        assert q.stats(now=0).tombstones == 0 and q.stats(now=0).totals["purged"] == 0
        q.enqueue("x", {"v": 1}, flow="F", now=0)
        q.ack(q.claim(now=0), now=0)
        assert q.purge(acked_before=1, now=1).events == 1
        assert not q.enqueue("x", {"v": 1}, flow="F", now=2).created
    fairq.Queue(fresh).close()
    assert schema(old) == schema(fresh)


def test_a_version_3_file_keeps_its_audit_rows_and_can_record_a_clock_reset(tmp_path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    conn = sqlite3.connect(old)
    conn.executescript((FIXTURES / "schema_v3.sql").read_text(encoding="utf-8"))
    conn.executescript("""
        INSERT INTO audit (id, event_id, action, reason, actor, generation, at_ms, detail)
        VALUES (7, 'e1', 'retry', 'flaky', 'w1', 1, 500, '{"attempts":1}'),
               (9, 'e1', 'redrive', 'fixed', 'ops', 3, 900, '{}');
        UPDATE clock SET now_ms = 5000000;
    """)
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with fairq.Queue(old, clock=lambda: 1000.0) as q:
        assert [(a.action, a.reason, a.at, a.detail) for a in q.audit("e1")] == [
            ("retry", "flaky", 0.5, {"attempts": 1}), ("redrive", "fixed", 0.9, {})]
        q.reset_clock(reason="clock jumped", actor="ops")
        assert [a.action for a in q.audit()] == ["retry", "redrive", "clock_reset"]
    fairq.Queue(fresh).close()
    assert schema(old) == schema(fresh)


def build_v4(path: Path) -> None:
    """A version 4 file with an audit row and a ready event, as an older fairq left it."""
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "schema_v4.sql").read_text(encoding="utf-8"))
    conn.executescript("""
        INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms,
                           pass, turn, dispatch_ms, runnable)
        VALUES ('u1', NULL, 1, '{"n":1}', 'ready', 0, 0, 0, 0, 1, 0, 0);
        UPDATE clock SET ready_n = 1, enqueued_total = 1, turn = 1, now_ms = 0;
        INSERT INTO audit (id, event_id, action, reason, actor, generation, at_ms, detail)
        VALUES (4, '', 'clock_reset', 'jumped', 'ops', NULL, 0, '{}');
    """)
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()


def test_a_version_4_file_stores_the_policy_of_the_open_that_upgrades_it(tmp_path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    build_v4(old)
    with fairq.Queue(old, max_attempts=2, lease_seconds=8) as q:
        assert q.policy() == fairq.Policy(max_attempts=2, backoff=fairq.Backoff(), lease_seconds=8.0)
        assert [(a.action, a.reason) for a in q.audit()] == [("clock_reset", "jumped")]
        q.set_policy(max_attempts=1, reason="fail fast")  # the widened audit CHECK takes the change
        assert q.claim(now=0).lease_until == 8.0
    with pytest.raises(fairq.PolicyMismatch):
        fairq.Queue(old, max_attempts=2)  # the upgrade stored it; this open no longer decides it
    fairq.Queue(fresh).close()
    assert schema(old) == schema(fresh)


def test_a_version_4_file_opened_without_arguments_stores_the_defaults(tmp_path) -> None:
    path = tmp_path / "old.db"
    build_v4(path)
    with fairq.Queue(path) as q:
        assert q.policy() == fairq.Policy() and q.policy().version == 1
