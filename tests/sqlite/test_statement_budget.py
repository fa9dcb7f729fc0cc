"""How many SQL statements each verb of a single-item cycle runs on SQLite.

BEGIN and COMMIT included, as SQLite's trace callback reports them: the
count is what a single-item call costs beyond its flush, so a statement
added to the hot path shows here. (Speed itself is measured by
benchmarks/run.py, never by a test.)
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

import fairq


def traced(q: fairq.Queue, call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """call()'s result and the statements fairq's connection ran for it."""
    seen: list[str] = []
    conn = q._store.db.conn
    conn.set_trace_callback(seen.append)
    try:
        return call(), seen
    finally:
        conn.set_trace_callback(None)


def test_an_unordered_enqueue_claim_ack_cycle_runs_five_or_six_statements_per_verb(q: fairq.Queue) -> None:
    q.enqueue("warm", {}, now=1)
    q.ack(q.claim(now=1), now=1)
    _, enqueue = traced(q, lambda: q.enqueue("e1", {"i": 1}, now=2))
    lease, claim = traced(q, lambda: q.claim(now=2))
    _, ack = traced(q, lambda: q.ack(lease, now=2))
    # BEGIN, the state row, the insert (which finds the id new: no lookup),
    # the state row write, COMMIT.
    assert len(enqueue) == 5, enqueue
    # BEGIN, the state row (with the waiting index's first entry and the
    # rotation index's first head), the claim, the state row write, COMMIT:
    # nothing came due, so no promotion and no page of its own.
    assert len(claim) == 5, claim
    assert not any(sql.startswith("UPDATE event SET runnable = 1") for sql in claim)
    # BEGIN, the state row, the fence read, the ack, the state row write, COMMIT.
    assert len(ack) == 6, ack


def test_a_repeat_of_an_unordered_id_is_judged_and_writes_nothing(q: fairq.Queue) -> None:
    q.enqueue("e1", {"i": 1}, now=1)
    turn = q._store.db.conn.execute("SELECT turn FROM queue_state").fetchone()[0]
    again, repeat = traced(q, lambda: q.enqueue("e1", {"i": 1}, now=1))
    assert again.created is False and again.seq == 1
    # The insert finds the id known and writes nothing; the lookup judges the repeat.
    assert [sql.split()[0] for sql in repeat] == ["BEGIN", "SELECT", "INSERT", "SELECT", "COMMIT"], repeat
    with pytest.raises(fairq.Conflict):
        q.enqueue("e1", {"i": 2}, now=1)
    assert q._store.db.conn.execute("SELECT turn FROM queue_state").fetchone()[0] == turn
    stats = q.stats(now=1)
    assert stats.counts["ready"] == 1 and stats.totals["enqueued"] == 1


def test_an_ordered_cycle_adds_only_the_flow_statements(q: fairq.Queue) -> None:
    q.enqueue("warm", {}, flow="F", now=1)
    q.ack(q.claim(now=1), now=1)
    _, enqueue = traced(q, lambda: q.enqueue("e1", {"i": 1}, flow="F", now=2))
    lease, claim = traced(q, lambda: q.claim(now=2))
    _, ack = traced(q, lambda: q.ack(lease, now=2))
    # + the one id's lookup, + the flow's seq, + whether the flow already has a head
    assert len(enqueue) == 8, enqueue
    assert len(claim) == 5, claim
    assert len(ack) == 7, ack  # + handing the head to the next seq


def test_an_idle_claim_reads_one_statement_and_writes_nothing(q: fairq.Queue) -> None:
    q.enqueue("later", {}, delay=60, now=1)
    got, claim = traced(q, lambda: q.claim(now=2))
    assert got is None
    assert [sql.split()[0] for sql in claim] == ["BEGIN", "SELECT", "COMMIT"], claim


def test_a_claim_that_promotes_reads_its_page_after_the_promotion(q: fairq.Queue) -> None:
    q.enqueue("soon", {}, delay=1, now=0)  # ahead of "now" in the rotation, once promoted
    q.enqueue("now", {}, now=1)
    got, claim = traced(q, lambda: q.claim(now=2))
    assert got is not None and got.event_id == "soon"
    assert [sql.split()[0] for sql in claim][:4] == ["BEGIN", "SELECT", "UPDATE", "SELECT"], claim


def test_a_claim_promotes_only_when_a_waiting_head_has_come_due(q: fairq.Queue) -> None:
    q.enqueue("later", {"n": 1}, delay=60, now=1)
    early, before = traced(q, lambda: q.claim(now=60))
    due, after = traced(q, lambda: q.claim(now=61))
    assert early is None and not any(sql.startswith("UPDATE event SET runnable = 1") for sql in before)
    assert due is not None and due.event_id == "later"
    assert any(sql.startswith("UPDATE event SET runnable = 1") for sql in after)


def test_an_expired_lease_is_promoted_and_claimed_again(q: fairq.Queue) -> None:
    q.enqueue("e1", {}, now=0)
    first = q.claim(now=0, lease_seconds=5)
    assert q.claim(now=4.999) is None
    again = q.claim(now=5)
    assert again is not None and again.event_id == "e1" and again.generation == first.generation + 1


def test_the_claim_lag_histogram_counts_claims_made_by_two_queues_on_one_file(tmp_path) -> None:
    path = tmp_path / "q.db"
    a, b = fairq.Queue(path, synchronous="normal"), fairq.Queue(path, synchronous="normal")
    try:
        a.enqueue_many([(f"e{i}", {}) for i in range(6)], now=0)
        for i in range(6):
            queue = a if i % 2 else b
            queue.ack(queue.claim(now=i), now=i)
        buckets = dict(a.stats(now=10).claim_lag_buckets)
        assert sum(buckets.values()) == 6
        assert sum(dict(b.stats(now=10).claim_lag_buckets).values()) == 6
    finally:
        a.close()
        b.close()


def test_single_item_calls_leave_no_garbage_for_the_collector(q: fairq.Queue) -> None:
    # A reference cycle per call (a transaction and its own flush) was freed
    # only by the garbage collector: a collection every few dozen cycles.
    q.enqueue("warm", {}, now=1)
    q.ack(q.claim(now=1), now=1)
    gc.collect()
    gc.disable()
    try:
        for i in range(20):
            q.enqueue(f"e{i}", {"i": i}, now=2)
            lease = q.claim(now=2)
            q.extend(lease, now=2)
            q.ack(lease, now=2)
            q.enqueue_many([(f"b{i}", {}, "F"), (f"c{i}", {}, "F")], now=2)
            q.settle_many([(lease, "retry", "again") for lease in q.claim_many(2, now=2)], now=2)
        assert gc.collect() == 0
    finally:
        gc.enable()
