"""No statement on the hot path scans events or flows, or sorts.

Every statement the verbs run is recorded as it was prepared (SQL text and
bound parameters, by wrapping fairq's own connection and cursor classes) on a file with a
few thousand events, then explained with the same parameters; a regression
to a table scan or a temp b-tree fails here.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

import fairq
from fairq.stores.sqlite.callbacks import OwnConnection, OwnCursor

# The allowed SCANs on the write path: walking the rotation index in order,
# stopped by LIMIT, and reading a batch's own parameter list (a JSON array).
ROTATION_SCAN = re.compile(r"SCAN e USING (COVERING )?INDEX event_rotation")
ALLOWED_SCAN = re.compile(ROTATION_SCAN.pattern + r"|SCAN (json_each|j) VIRTUAL TABLE INDEX \d+:")
# Reads may also walk the head indexes (stats reads every head, never the
# events behind them); none may scan a table.
HEAD_SCAN = re.compile(r"SCAN (e|event) USING (COVERING )?INDEX event_(rotation|waiting|quarantined|paused)"
                       r"|SCAN CONSTANT ROW|SCAN \(subquery-\d+\)")


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
    q.settle_many([(lease, "fail", "bad") for lease in leases[:-1]] + [(leases[-1], "release")], now=2)
    q.redrive(leases[0].event_id, expected_generation=leases[0].generation, reason="again", now=3)
    old = q.claim(now=3)
    assert old is not None
    q.claim(now=100)  # reclaims the expired lease


def read_everything(q: fairq.Queue) -> None:
    q.get("A1")
    q.events(flow="A")
    q.events(state="quarantined")
    q.audit("A2")
    q.stats(now=100)
    q.why_blocked("A", now=100)
    q.why_blocked("B", now=100)


def recorded(q: fairq.Queue, fn: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every (sql, parameters) fairq's connection executed while fn(q) ran."""
    seen: list[tuple[str, Any]] = []

    def execute(self: OwnConnection, sql: str, params: Any = ()) -> sqlite3.Cursor:
        seen.append((sql, params))
        return sqlite3.Connection.execute(self, sql, params)

    def executemany(self: OwnConnection, sql: str, rows: Any) -> sqlite3.Cursor:
        rows = list(rows)
        if rows:
            seen.append((sql, rows[0]))
        return sqlite3.Connection.executemany(self, sql, rows)

    def cursor_execute(self: OwnCursor, sql: str, params: Any = ()) -> sqlite3.Cursor:
        seen.append((sql, params))
        return sqlite3.Cursor.execute(self, sql, params)

    def cursor_executemany(self: OwnCursor, sql: str, rows: Any) -> sqlite3.Cursor:
        rows = list(rows)
        if rows:
            seen.append((sql, rows[0]))
        return sqlite3.Cursor.executemany(self, sql, rows)

    monkeypatch.setattr(OwnConnection, "execute", execute)
    monkeypatch.setattr(OwnConnection, "executemany", executemany)
    # The write path's own cursor (Database.cursor) runs the hot statements.
    monkeypatch.setattr(OwnCursor, "execute", cursor_execute)
    monkeypatch.setattr(OwnCursor, "executemany", cursor_executemany)
    fn(q)
    monkeypatch.undo()
    return seen


@pytest.fixture
def busy_queue(q: fairq.Queue) -> fairq.Queue:
    # A few thousand events over a few hundred flows, some acked, some held,
    # so the planner sees tables of a realistic shape.
    q.enqueue_many([(f"bg{i}", {"i": i}, f"bg-{i % 300}") for i in range(3000)], now=0)
    q.enqueue_many([(f"free{i}", {"i": i}) for i in range(500)], now=0)
    q.settle_many([(lease, "ack") for lease in q.claim_many(200, now=0)], now=0)
    q.claim_many(100, now=0)
    return q


def plan(conn: sqlite3.Connection, sql: str, params: Any) -> list[str]:
    return [row[3] for row in sqlite3.Connection.execute(conn, "EXPLAIN QUERY PLAN " + sql, params)]


def statements(seen: list[tuple[str, Any]]) -> dict[str, Any]:
    out = {}
    for sql, params in seen:
        if sql.lstrip().split()[0].upper() in ("SELECT", "UPDATE", "INSERT", "DELETE"):
            out.setdefault(sql, params)
    return out


def test_the_write_path_never_scans_a_table_or_sorts(busy_queue: fairq.Queue, monkeypatch) -> None:
    conn = busy_queue._store.db.conn
    checked = statements(recorded(busy_queue, exercise, monkeypatch))
    assert len(checked) >= 15
    for sql, params in checked.items():
        for line in plan(conn, sql, params):
            assert "TEMP B-TREE" not in line, (sql, line)
            if line.startswith("SCAN"):
                assert ALLOWED_SCAN.fullmatch(line), (sql, line)


def test_reads_never_scan_a_table(busy_queue: fairq.Queue, monkeypatch) -> None:
    conn = busy_queue._store.db.conn
    exercise(busy_queue)
    checked = statements(recorded(busy_queue, read_everything, monkeypatch))
    assert len(checked) >= 8
    for sql, params in checked.items():
        for line in plan(conn, sql, params):
            if line.startswith("SCAN"):
                assert ALLOWED_SCAN.fullmatch(line) or HEAD_SCAN.fullmatch(line), (sql, line)


def test_a_claim_reads_the_rotation_index_and_promotes_by_time(busy_queue: fairq.Queue, monkeypatch) -> None:
    conn = busy_queue._store.db.conn
    # At 31 s the 30 s leases taken at 0 have run out: there is something to promote.
    seen = recorded(busy_queue, lambda q: q.claim(now=31), monkeypatch)
    pick = next((sql, p) for sql, p in seen if "ORDER BY e.pass, e.turn" in sql)
    lines = plan(conn, *pick)
    assert any(ROTATION_SCAN.fullmatch(line) for line in lines), lines
    promote = next((sql, p) for sql, p in seen if sql.startswith("UPDATE event SET runnable = 1"))
    assert plan(conn, *promote) == ["SEARCH event USING INDEX event_waiting (dispatch_ms<?)"]


def test_the_earliest_waiting_head_is_read_with_the_state_row_by_one_index_seek(
        busy_queue: fairq.Queue, monkeypatch) -> None:
    conn = busy_queue._store.db.conn
    seen = recorded(busy_queue, lambda q: q.claim(now=1), monkeypatch)
    state = next((sql, p) for sql, p in seen if "FROM queue_state AS s" in sql)
    assert "SEARCH event USING INDEX event_waiting (dispatch_ms>?)" in plan(conn, *state)
    # Nothing came due at 1 s (the leases end at 30 s): no promotion ran.
    assert not [sql for sql, _ in seen if sql.startswith("UPDATE event SET runnable = 1")]


def test_beside_tenants_heads_of_no_tenant_are_still_read_through_the_rotation_index(
        busy_queue: fairq.Queue, monkeypatch) -> None:
    conn = busy_queue._store.db.conn
    busy_queue.enqueue_many([(f"t{i}", {}, f"tf-{i % 50}", f"tenant-{i % 10}") for i in range(500)], now=0)
    busy_queue.set_tenant("tenant-0", max_inflight=1, now=0)
    seen = recorded(busy_queue, lambda q: q.claim_many(30, now=31), monkeypatch)
    state = next((sql, p) for sql, p in seen if "FROM queue_state AS s" in sql)
    state_plan = plan(conn, *state)
    assert any(ROTATION_SCAN.fullmatch(line) for line in state_plan), state_plan
    page = next((sql, p) for sql, p in seen if "ORDER BY e.pass, e.turn LIMIT :limit" in sql)
    assert any(ROTATION_SCAN.fullmatch(line) for line in plan(conn, *page))
    # The tenants' side: one step into the tenants' rotation index, then the tenant's own heads.
    first = next((sql, p) for sql, p in seen if "FROM tenant AS t INDEXED BY tenant_rotation" in sql)
    assert plan(conn, *first)[:1] == ["SCAN t USING INDEX tenant_rotation"]
    assert "SEARCH e USING INDEX event_tenant_rotation (tenant_id=?)" in plan(conn, *first)


def test_the_dead_letter_listing_uses_its_partial_index(q: fairq.Queue, monkeypatch) -> None:
    conn = q._store.db.conn
    seen = recorded(q, lambda q: q.events(state="quarantined"), monkeypatch)
    sql, params = next((s, p) for s, p in seen if s.startswith("SELECT"))
    assert any("event_quarantined" in line for line in plan(conn, sql, params))


def page_through(q: fairq.Queue) -> None:
    q.flows(limit=50)
    q.flows(after="bg-150", limit=50, now=100)
    q.events(state="quarantined", after="A2", limit=10)
    q.events(flow="bg-7", after="bg7", limit=10)
    q.events(after="free10", limit=10)
    q.schedules.misfires("beat", limit=5)


def test_the_console_listings_page_by_key_through_indexes_without_sorting(busy_queue: fairq.Queue,
                                                                         monkeypatch) -> None:
    conn = busy_queue._store.db.conn
    exercise(busy_queue)
    busy_queue.schedules.add("beat", every=60, start=0)
    checked = statements(recorded(busy_queue, page_through, monkeypatch))
    assert len(checked) >= 7
    for sql, params in checked.items():
        lines = plan(conn, sql, params)
        assert not any("TEMP B-TREE" in line for line in lines), (sql, lines)
        for line in lines:
            if line.startswith("SCAN"):
                # Walking the flow name index or the head indexes in order, stopped by LIMIT.
                assert (re.fullmatch(r"SCAN flow USING (COVERING )?INDEX sqlite_autoindex_flow_1", line)
                        or ALLOWED_SCAN.fullmatch(line) or HEAD_SCAN.fullmatch(line)), (sql, line)
    paged = [sql for sql in checked if ":after" in sql]
    assert paged and all(any(line.startswith("SEARCH") for line in plan(conn, sql, checked[sql])) for sql in paged)


def test_an_inbox_counts_one_flows_receipts_through_its_index(tmp_path) -> None:
    with fairq.Inbox(tmp_path / "receiver.db") as inbox:
        for seq in range(1, 4):
            inbox.receive(f"a{seq}", "A", seq, {})
        conn = inbox._store.db.conn
        sent: list[str] = []
        conn.set_trace_callback(sent.append)
        try:
            assert inbox.received("A") == 3
        finally:
            conn.set_trace_callback(None)
        counts = [sql for sql in sent if "count(*)" in sql]
        assert len(counts) == 1, sent
        lines = plan(conn, counts[0], {})  # the trace shows the statement with its values bound
    assert any(line.startswith("SEARCH") and "INDEX" in line for line in lines), lines
    assert not any(line.startswith("SCAN") for line in lines), lines
