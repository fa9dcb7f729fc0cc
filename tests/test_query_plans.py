"""Rule 11: no statement on the hot path scans events or flows, or sorts.

Every statement the write verbs run is captured with a trace callback and
explained; a regression to a table scan or a temp b-tree fails here.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

import fairq

# The allowed SCANs: walking the rotation index in order, stopped by LIMIT,
# and reading a batch's own parameter list (a JSON array).
ROTATION_SCAN = re.compile(r"SCAN e USING (COVERING )?INDEX event_rotation")
ALLOWED_SCAN = re.compile(ROTATION_SCAN.pattern + r"|SCAN (json_each|j) VIRTUAL TABLE INDEX \d+:")


def exercise(q: fairq.Queue) -> None:
    q.set_weight("A", 2)
    q.enqueue("A1", {"n": 1}, flow="A", now=0)
    q.enqueue_many([("A2", {}, "A"), ("B1", {}, "B"), ("u1", {})], now=0)
    q.enqueue("A1", {"n": 1}, flow="A", now=0)  # identical repeat
    lease = q.claim(now=0)
    lease = q.extend(lease, now=1)
    q.ack(lease, now=1)
    b1 = q.claim(now=1)
    q.retry(b1, "later", now=1)
    leases = q.claim_many(5, now=2)
    q.settle_many([(lease, "fail", "bad") for lease in leases], now=2)
    q.redrive("A2", expected_generation=1, reason="again", now=3)
    old = q.claim(now=3)
    assert old is not None
    q.claim(now=100)  # reclaims the expired lease


@pytest.fixture
def traced(q: fairq.Queue):
    statements: list[str] = []
    conn = q._store.db.conn
    conn.set_trace_callback(statements.append)
    exercise(q)
    conn.set_trace_callback(None)
    return q, statements


def plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]


def test_the_hot_path_never_scans_a_table_or_sorts(traced) -> None:
    q, statements = traced
    conn = q._store.db.conn
    checked = 0
    for sql in set(statements):
        head = sql.lstrip().split()[0].upper()
        if head not in ("SELECT", "UPDATE", "INSERT", "DELETE"):
            continue  # BEGIN, COMMIT, PRAGMA
        checked += 1
        for line in plan(conn, sql):
            assert "TEMP B-TREE" not in line, (sql, line)
            if line.startswith("SCAN"):
                assert ALLOWED_SCAN.fullmatch(line), (sql, line)
    assert checked >= 15


def test_a_claim_reads_the_rotation_index_and_the_head_by_rowid(traced) -> None:
    q, statements = traced
    conn = q._store.db.conn
    pick = next(s for s in statements if "ORDER BY e.pass, e.turn" in s)
    lines = plan(conn, pick)
    assert any(ROTATION_SCAN.fullmatch(line) for line in lines), lines
    assert any(line.startswith("SEARCH f USING INTEGER PRIMARY KEY") for line in lines), lines
    promote = next(s for s in statements if s.startswith("UPDATE event SET runnable = 1"))
    assert plan(conn, promote) == ["SEARCH event USING INDEX event_waiting (dispatch_ms<?)"]


def test_the_dead_letter_listing_uses_its_partial_index(q: fairq.Queue) -> None:
    statements: list[str] = []
    conn = q._store.db.conn
    conn.set_trace_callback(statements.append)
    q.events(state="quarantined")
    conn.set_trace_callback(None)
    sql = next(s for s in statements if s.startswith("SELECT"))
    assert any("event_quarantined" in line for line in plan(conn, sql))
