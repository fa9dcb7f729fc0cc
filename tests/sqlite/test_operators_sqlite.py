"""Discard, pause and the new counts in the SQLite store: what the indexes
read, what a claim costs beside paused flows, and the flow walks that step
over discarded events (the promise tests are tests/contract/test_discard_pause.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

import fairq
from fairq.stores.sqlite.reads import _CLAIMABLE, _LIMITS
from helpers import drain_order


def plan(conn: sqlite3.Connection, sql: str, params: Any) -> list[str]:
    return [row[3] for row in sqlite3.Connection.execute(conn, "EXPLAIN QUERY PLAN " + sql, params)]


def test_claimable_now_reads_the_rotation_and_waiting_indexes_only(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {}, f"f{i % 50}") for i in range(500)], now=0)
    q.enqueue_many([(f"t{i}", {}, f"tf{i % 20}", f"tenant-{i % 4}") for i in range(100)], now=0)
    conn = q._store.db.conn
    lines = plan(conn, _CLAIMABLE, {"now_ms": 0})
    assert any("INDEX event_rotation" in line for line in lines), lines
    assert any("INDEX event_tenant_rotation" in line for line in lines), lines
    assert any("INDEX event_waiting" in line for line in lines), lines
    assert not [line for line in lines if "TEMP B-TREE" in line or line == "SCAN event"], lines
    limits = plan(conn, _LIMITS, {"now_ms": 0, "ids": "[1, 2]"})
    assert not [line for line in limits if "TEMP B-TREE" in line or line.startswith("SCAN t")], limits


def vm_steps(q: fairq.Queue, fn: Any) -> int:
    """SQLite virtual machine instructions fn(q) ran on the queue's connection."""
    conn = q._store.db.conn
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(count, 1)
    try:
        fn(q)
    finally:
        conn.set_progress_handler(None, 1)
    return steps[0]


def cycle(q: fairq.Queue) -> None:
    lease = q.claim(now=1)
    assert lease is not None and lease.flow == "live"
    q.ack(lease, now=1)


def test_a_claim_beside_ten_thousand_paused_flows_costs_what_it_costs_beside_none(tmp_path) -> None:
    costs = []
    for paused in (0, 10_000):
        with fairq.Queue(tmp_path / f"{paused}.db") as q:
            q.enqueue_many([(f"p{i}", {}, f"paused-{i}") for i in range(paused)], now=0)
            for i in range(paused):
                q.pause(f"paused-{i}", reason="hold", now=0)
            q.enqueue_many([(f"l{i}", {}, "live") for i in range(3)], now=0)
            cycle(q)  # warm: the statements are prepared
            costs.append(vm_steps(q, cycle))
            stats = q.stats(now=1)
            assert (stats.claimable_now, stats.blocked_flows) == (1, paused)
    assert costs[0] == costs[1], costs


def test_a_flow_steps_over_discarded_events_before_and_behind_its_head(q: fairq.Queue) -> None:
    q.enqueue_many([(f"a{i}", {}, "A") for i in range(1, 8)], now=0)
    for event_id in ("a2", "a3", "a5"):  # behind the head
        q.discard(event_id, expected_generation=0, reason="not needed", now=0)
    assert q.why_blocked("A", now=0).why != "empty"
    assert drain_order(q, now=0, limit=1) == ["a1"]
    assert [f.head.event_id for f in q.flows(now=0) if f.head] == ["a4"]  # a2 and a3 stepped over
    q.discard("a4", expected_generation=0, reason="skip", now=0)  # a head: a5 is discarded, a6 takes over
    assert [f.head.event_id for f in q.flows(now=0) if f.head] == ["a6"]
    q.enqueue("a8", {}, flow="A", now=0)
    assert drain_order(q, now=0) == ["a6", "a7", "a8"]
    assert q.why_blocked("A", now=0).why == "empty"


def test_an_enqueue_after_a_discarded_last_event_knows_whether_the_flow_has_a_head(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    q.discard("a2", expected_generation=0, reason="behind the head", now=0)
    q.enqueue("a3", {}, flow="A", now=0)  # a1 is still the head: a3 waits behind it
    q.enqueue("b1", {}, flow="B", now=0)
    q.discard("b1", expected_generation=0, reason="the head", now=0)
    q.enqueue("b2", {}, flow="B", now=0)  # B was idle: b2 is its head at once
    assert sorted(drain_order(q, now=0)) == ["a1", "a3", "b2"]


def test_purge_keeps_a_discarded_event_behind_its_head_until_the_head_passes_it(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("a3", {}, "A")], now=0)
    q.discard("a2", expected_generation=0, reason="dup", now=0)
    assert q.purge(acked_before=10, now=10).events == 0  # a1 is the head: a2 stays
    assert q.get("a2") is not None
    assert drain_order(q, now=10) == ["a1", "a3"]
    assert q.purge(acked_before=20, now=20).events == 3
    assert q.stats(now=20).counts["discarded"] == 0


def test_a_lease_that_ends_in_a_paused_flow_waits_for_the_resume(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    lease = q.claim(now=0, lease_seconds=5)
    assert lease is not None
    q.pause("A", reason="hold", now=1)
    assert q.claim(now=10) is None  # the lease ended, but the flow is paused
    assert q.stats(now=10).claimable_now == 0
    q.resume("A", now=10)
    assert q.stats(now=10).claimable_now == 1
    again = q.claim(now=10)
    assert again is not None and again.event_id == "a1" and again.attempts == 2


def test_a_retry_and_a_redrive_in_a_paused_flow_stay_out_of_the_rotation(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A", "T"), ("b1", {}, "B", "T")], now=0)
    a1 = q.claim(now=0)
    b1 = q.claim(now=0)
    assert a1 is not None and b1 is not None
    q.pause("A", reason="hold", now=0)
    q.pause("B", reason="hold", now=0)
    q.retry(a1, "again", delay=0, now=0)
    q.fail(b1, "bad", now=0)
    q.redrive("b1", expected_generation=b1.generation, reason="fixed", now=0)
    assert q.claim(now=0) is None
    [t] = q.tenants(now=0)
    assert t.ready == 2
    q.resume("A", now=0)
    q.resume("B", now=0)
    assert sorted(drain_order(q, now=0)) == ["a1", "b1"]


def test_a_clock_reset_leaves_a_paused_head_out_of_the_dispatch_indexes(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    assert q.claim(now=100, lease_seconds=50) is not None
    q.enqueue("b1", {}, flow="B", delay=100, now=100)
    q.pause("A", reason="hold", now=100)
    q.pause("B", reason="hold", now=100)
    q.reset_clock(to=10, reason="clock was ahead")
    assert q.claim(now=300) is None
    q.resume("A", now=300)
    q.resume("B", now=300)
    assert sorted(drain_order(q, now=300)) == ["a1", "a2", "b1"]
