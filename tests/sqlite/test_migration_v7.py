"""Schema step 7: tenants.

tests/fixtures/schema_v6.sql is queue.sql as it was at user_version 6 (no
tenants); it never changes. A version 6 file upgrades to exactly the schema
a fresh file gets; its events keep their places and are claimed in exactly
the order they would have been, and its audit rows keep their ids.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import fairq
from fairq.stores.sqlite import schema as migrate
from helpers import FIXTURES, SHORT_SETTINGS, check_invariants

# The columns a version 6 file has, of the tables a queue's events live in.
V6_COLUMNS = {
    "flow": "flow_id, name, weight, next_seq",
    "event": ("id, event_id, flow_id, seq, body, state, generation, attempts, lifetime_attempts, created_ms, "
              "due_ms, next_at_ms, lease_until_ms, owner, reason, first_claim_ms, settled_ms, pass, turn, "
              "dispatch_ms, runnable"),
    "audit": "id, event_id, action, reason, actor, generation, at_ms, detail",
    "queue_state": ("id, now_ms, vtime, tail, turn, ready_n, inflight_n, acked_n, quarantined_n, enqueued_total, "
                    "claimed_total, expired_total, acked_total, retried_total, quarantined_total, redriven_total, "
                    "claim_lag"),
    "policy": "*",
    "tombstone": "*",
    "retention": "*",
}


def schema(path: Path) -> dict[str, object]:
    """The schema objects (SQL without comments or layout) and the file's marks."""
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


def busy_queue(path: Path) -> None:
    """A queue mid-way: weighted flows, unordered events, delays, a backoff,
    a live lease, an expired one, a quarantined head, acked and purged events."""
    with fairq.Queue(path, **SHORT_SETTINGS) as q:
        q.set_weight("heavy", 3)
        q.enqueue_many([(f"h{i}", {"i": i}, "heavy") for i in range(12)], now=0)
        q.enqueue_many([(f"l{i}", {"i": i}, "light") for i in range(6)], now=0)
        q.enqueue_many([(f"u{i}", {"i": i}) for i in range(5)], now=0)
        q.enqueue("late", {}, flow="later", delay=50, now=0)
        for lease in q.claim_many(4, now=1):
            q.ack(lease, now=1)
        q.purge(acked_before=2, now=2)
        first = q.claim(now=3)
        q.retry(first, "backing off", now=3)
        q.claim(now=3, lease_seconds=1)  # expires at 4
        q.claim(now=3, lease_seconds=100)  # still leased after the upgrade
        dead = q.claim(now=3)
        q.fail(dead, "bad", now=3)
        q.enqueue_many([(f"n{i}", {}, f"new-{i}") for i in range(3)], now=4)


def as_version_6(new: Path, old: Path) -> None:
    """The same queue in a version 6 file: the fixture's schema, every row copied."""
    conn = sqlite3.connect(old)
    conn.executescript((FIXTURES / "schema_v6.sql").read_text(encoding="utf-8"))
    conn.execute("DELETE FROM queue_state")
    conn.execute("DELETE FROM policy")
    conn.execute("DELETE FROM retention")
    conn.execute("ATTACH DATABASE ? AS src", (str(new),))
    for table, columns in V6_COLUMNS.items():
        conn.execute(f"INSERT INTO main.{table} SELECT {columns} FROM src.{table}")  # noqa: S608
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()


def drain(q: fairq.Queue) -> list[str]:
    """Claim one at a time (one in three retried once), enqueueing as it goes; the claim order."""
    order: list[str] = []
    now = 10.0
    for step in range(200):
        if step % 5 == 0:
            q.enqueue(f"x{step}", {}, flow=f"x{step % 3}", now=now)
        lease = q.claim(now=now)
        if lease is None:
            now += 25
            if now > 400:
                break
            continue
        order.append(lease.event_id)
        if step % 3 == 0 and lease.attempts == 1:
            q.retry(lease, "once more", delay=0, now=now)
        else:
            q.ack(lease, now=now)
    return order


def test_a_version_6_file_migrates_to_exactly_the_fresh_schema(tmp_path: Path) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    busy_queue(new)
    as_version_6(new, old)
    fairq.Queue(old).close()
    migrated = schema(old)
    assert migrated == schema(new)
    assert migrated["user_version"] == migrate.LATEST == 10
    tables = [name for kind, name, _, _ in migrated["objects"] if kind == "table"]
    assert "tenant" in tables


def test_a_migrated_queue_claims_in_exactly_the_order_it_would_have(tmp_path: Path) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    busy_queue(new)
    as_version_6(new, old)
    events = sqlite3.connect(old).execute("SELECT count(*) FROM event").fetchone()[0]
    with fairq.Queue(old, **SHORT_SETTINGS) as upgraded, fairq.Queue(new, **SHORT_SETTINGS) as never_old:
        assert upgraded.stats(now=5).counts == never_old.stats(now=5).counts
        expected = drain(never_old)
        assert len(expected) > events
        assert drain(upgraded) == expected
    check_invariants(old)


def test_the_upgrade_keeps_every_audit_row_with_its_id(tmp_path: Path) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    busy_queue(new)
    as_version_6(new, old)
    before = sqlite3.connect(old).execute("SELECT * FROM audit ORDER BY id").fetchall()
    assert before
    with fairq.Queue(old) as q:
        q.set_tenant("acme", weight=2, reason="new plan", now=10)
        log = q.audit()
    assert [(e.id, e.event_id, e.action) for e in log[:-1]] == [(r[0], r[1], r[2]) for r in before]
    assert log[-1].action == "set_tenant" and log[-1].id == before[-1][0] + 1


def test_the_upgrade_refuses_an_application_table_named_tenant(tmp_path: Path) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    busy_queue(new)
    as_version_6(new, old)
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE tenant (customer TEXT)")  # the application's own table
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="tenant"):
        fairq.Queue(old)
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone() == (6,)


def test_a_migrated_queue_takes_tenants_beside_its_old_flows(tmp_path: Path) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    busy_queue(new)
    as_version_6(new, old)
    with fairq.Queue(old, **SHORT_SETTINGS) as q:
        q.enqueue("t1", {}, flow="t", tenant="acme", now=10)
        with pytest.raises(fairq.Conflict):
            q.enqueue("h99", {}, flow="heavy", tenant="acme", now=10)
        claimed = [lease.event_id for lease in q.claim_many(100, now=10)]
        assert "t1" in claimed
    check_invariants(old)
