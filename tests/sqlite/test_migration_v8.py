"""Schema step 8: an operator's decisions (discarded events, paused flows).

tests/fixtures/schema_v7.sql is queue.sql as it was at user_version 7; it
never changes. A version 7 file upgrades to exactly the schema a fresh file
gets; the event table, rebuilt, keeps every row with its id, its events are
claimed in exactly the order they would have been, its audit rows keep their
ids, and the upgraded queue discards and pauses.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import fairq
from fairq.stores.sqlite import schema as migrate
from helpers import FIXTURES, SHORT_SETTINGS, check_invariants, drain_order

# The columns a version 7 file has, of the tables step 8 changes or that hold a queue's state.
V7_COLUMNS = {
    "tenant": "*",
    "flow": "flow_id, name, weight, next_seq, tenant_id",
    "event": ("id, event_id, flow_id, seq, body, state, generation, attempts, lifetime_attempts, created_ms, "
              "due_ms, next_at_ms, lease_until_ms, owner, reason, first_claim_ms, settled_ms, pass, turn, "
              "dispatch_ms, runnable, tenant_id"),
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
    """A queue mid-way, with nothing step 8 adds: weighted flows, tenants,
    unordered events, a delay, a backoff, live and expired leases, a
    quarantined head, acked and purged events."""
    with fairq.Queue(path, **SHORT_SETTINGS) as q:
        q.set_weight("heavy", 3)
        q.enqueue_many([(f"h{i}", {"i": i}, "heavy") for i in range(12)], now=0)
        q.enqueue_many([(f"l{i}", {"i": i}, "light") for i in range(6)], now=0)
        q.enqueue_many([(f"t{i}", {"i": i}, f"tf{i % 3}", "acme") for i in range(9)], now=0)
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


def as_version_7(new: Path, old: Path) -> None:
    """The same queue in a version 7 file: the fixture's schema, every row copied."""
    conn = sqlite3.connect(old)
    conn.executescript((FIXTURES / "schema_v7.sql").read_text(encoding="utf-8"))
    for table in ("queue_state", "policy", "retention"):
        conn.execute(f"DELETE FROM {table}")  # noqa: S608
    conn.execute("ATTACH DATABASE ? AS src", (str(new),))
    for table, columns in V7_COLUMNS.items():
        conn.execute(f"INSERT INTO main.{table} SELECT {columns} FROM src.{table}")  # noqa: S608
    conn.commit()
    conn.execute("DETACH DATABASE src")
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    busy_queue(new)
    as_version_7(new, old)
    return new, old


def test_a_version_7_file_migrates_to_exactly_the_fresh_schema(files: tuple[Path, Path]) -> None:
    new, old = files
    rows = sqlite3.connect(old).execute("SELECT * FROM event ORDER BY id").fetchall()
    fairq.Queue(old).close()
    migrated = schema(old)
    assert migrated == schema(new)
    assert migrated["user_version"] == migrate.LATEST == 10
    # The rebuilt event table keeps every row, with its id and every column
    # (and the columns of later steps, added empty).
    upgraded = sqlite3.connect(old).execute("SELECT * FROM event ORDER BY id").fetchall()
    assert [row[:len(rows[0])] for row in upgraded] == rows
    assert {row[len(rows[0]):] for row in upgraded} == {(None, None, None, None)}
    check_invariants(old)


def test_a_migrated_queue_claims_in_exactly_the_order_it_would_have(files: tuple[Path, Path]) -> None:
    new, old = files
    with fairq.Queue(old, **SHORT_SETTINGS) as upgraded, fairq.Queue(new, **SHORT_SETTINGS) as never_old:
        assert upgraded.stats(now=5) == never_old.stats(now=5)
        expected = drain_order(never_old, now=200)
        assert len(expected) > 20
        assert drain_order(upgraded, now=200) == expected
    check_invariants(old)


def test_the_upgrade_keeps_every_audit_row_and_records_a_discard_and_a_pause(files: tuple[Path, Path]) -> None:
    _, old = files
    before = sqlite3.connect(old).execute("SELECT * FROM audit ORDER BY id").fetchall()
    assert before
    with fairq.Queue(old, **SHORT_SETTINGS) as q:
        [dead] = q.events(state="quarantined")
        q.discard(dead.event_id, expected_generation=dead.generation, reason="poison", actor="ops", now=10)
        q.pause("light", reason="supplier outage", now=10)
        log = q.audit()
        assert [(e.id, e.event_id, e.action) for e in log[:-2]] == [(r[0], r[1], r[2]) for r in before]
        assert [e.action for e in log[-2:]] == ["discard", "pause"]
        stats = q.stats(now=10)
        assert stats.counts["discarded"] == 1 and stats.counts["quarantined"] == 0
        assert stats.blocked_flows == 1  # light, paused
        assert "light" not in {lease.flow for lease in q.claim_many(100, now=10)}
    check_invariants(old)


def test_the_upgrade_refuses_a_newer_marked_file_untouched(files: tuple[Path, Path]) -> None:
    _, old = files
    conn = sqlite3.connect(old)
    conn.execute(f"PRAGMA user_version = {migrate.LATEST + 1:d}")
    conn.commit()
    conn.close()
    with pytest.raises(fairq.SchemaError, match="newer"):
        fairq.Queue(old)
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone() == (migrate.LATEST + 1,)
