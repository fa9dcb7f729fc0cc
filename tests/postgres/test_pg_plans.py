"""The claim path's statements use the head table's indexes: EXPLAIN, after
ANALYZE on a realistic backlog (many waiting events, many blocked flows),
shows no sequential scan of the events or the heads, so a claim's cost does not depend
on the backlog or on blocked flows."""

from __future__ import annotations

import time
from typing import Any

import pytest

import fairq
from fairq.postgres.txn import TxnCore
from pgcluster import require_psycopg

psycopg = require_psycopg()


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every statement the store runs, with its parameters, from now on."""
    seen: list[tuple[str, Any]] = []
    real = TxnCore.execute

    def execute(self: TxnCore, sql: str, params: Any = None) -> Any:
        seen.append((sql, params))
        return real(self, sql, params)

    monkeypatch.setattr(TxnCore, "execute", execute)
    return seen


def plans(url: str, statements: list[tuple[str, Any]]) -> list[str]:
    """The EXPLAIN text of each statement, inside a transaction rolled back."""
    out = []
    with psycopg.connect(url) as conn:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT", "DELETE", "WITH")) \
                    or "FROM generate_series" in sql or "pg_advisory" in sql or "pg_notify" in sql:
                continue
            rows = conn.execute("EXPLAIN " + sql, params).fetchall()
            out.append(sql + "\n" + "\n".join(r[0] for r in rows))
        conn.rollback()
    return out


def test_claim_and_settle_read_no_event_sequentially_beside_a_large_backlog_and_blocked_flows(
        pg_url: str, recorded: list[tuple[str, Any]]) -> None:
    with fairq.Queue(pg_url, lease_seconds=3600) as q:
        # 4,000 flows with 10 events each, then 3,000 of them blocked by a live lease.
        for start in range(0, 4000, 500):
            q.enqueue_many([{"event_id": f"e{f}-{i}", "body": {"n": i}, "flow": f"f{f}"}
                            for f in range(start, start + 500) for i in range(10)])
        for _ in range(6):
            q.claim_many(500)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        recorded.clear()
        leases = q.claim_many(3)
        q.settle_many([(leases[0], "ack"), (leases[1], "retry"), (leases[2], "release")])
        q.extend(q.claim(), 60)
    found = plans(pg_url, recorded)
    assert any("head_rotation" in p for p in found), "\n\n".join(found)
    scans = [p for p in found if "Seq Scan on event" in p or "Seq Scan on head" in p]
    assert not scans, "\n\n".join(scans)


def test_claims_and_settles_update_events_in_place_without_touching_their_indexes(pg_url: str) -> None:
    # Lease columns change on every claim and settle; none is indexed, and the
    # table leaves room on each page, so the updates are HOT (heap-only).
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([{"event_id": f"e{i}", "body": {}, "flow": f"f{i % 20}"} for i in range(400)])
        while leases := q.claim_many(20):
            q.settle_many([(lease, "ack") for lease in leases])
    # The queue's connection has closed: its statistics have reached the server.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for _ in range(50):  # statistics arrive shortly after a backend exits; only stops a hang
            conn.execute("SELECT pg_stat_clear_snapshot()")
            updated, hot = conn.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                "WHERE schemaname = current_schema() AND relname = 'event'").fetchone()
            if updated >= 800:
                break
            time.sleep(0.1)
    assert updated >= 800  # a claim and an ack per event
    assert hot >= 0.75 * updated, (hot, updated)  # measured: 91 %
