"""Each verb is one transaction; a failing write anywhere leaves nothing partial.

For every verb and every table it writes, a TEMP trigger makes that write
RAISE(ABORT). The verb must surface the error (never a success, never a
retry) and the file must be exactly as before.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

import fairq
from helpers import TABLES, Receiver, inject, snapshot


@dataclasses.dataclass
class Scenario:
    name: str
    setup: Callable[[fairq.Queue], Any]
    act: Callable[[fairq.Queue, Any], Any]
    writes: list[tuple[str, str]]  # (table, INSERT|UPDATE) the verb must write


def _lease(q: fairq.Queue) -> fairq.Lease:
    q.enqueue("A1", {"n": 1}, flow="A", now=0)
    q.enqueue("A2", {"n": 2}, flow="A", now=0)
    return q.claim(now=0)


def _quarantined(q: fairq.Queue) -> fairq.Lease:
    lease = _lease(q)
    q.fail(lease, "broken", now=0)
    return lease


def _expired_spent(q: fairq.Queue) -> None:
    q.enqueue("A1", {}, flow="A", now=0)
    for t in (0, 5, 10):
        q.claim(now=t)


EVENT = [("event", "UPDATE"), ("queue_state", "UPDATE")]
EVENT_AUDIT = [("event", "UPDATE"), ("audit", "INSERT"), ("queue_state", "UPDATE")]

SCENARIOS = [
    Scenario("enqueue into a new flow", lambda q: None,
             lambda q, _: q.enqueue("x", {}, flow="F", now=1),
             [("event", "INSERT"), ("flow", "INSERT"), ("queue_state", "UPDATE")]),
    Scenario("enqueue behind a head", lambda q: q.enqueue("h", {}, flow="F", now=0),
             lambda q, _: q.enqueue("x", {}, flow="F", now=1),
             [("event", "INSERT"), ("flow", "INSERT"), ("flow", "UPDATE"), ("queue_state", "UPDATE")]),
    Scenario("enqueue of an unordered event", lambda q: None,
             lambda q, _: q.enqueue("x", {}, now=1), [("event", "INSERT"), ("queue_state", "UPDATE")]),
    Scenario("enqueue_many", lambda q: q.enqueue("h", {}, flow="G", now=0),
             lambda q, _: q.enqueue_many([("a", {}, "F"), ("b", {}, "G"), ("c", {})], now=1),
             [("event", "INSERT"), ("flow", "INSERT"), ("flow", "UPDATE"), ("queue_state", "UPDATE")]),
    Scenario("claim", lambda q: q.enqueue("x", {}, flow="F", now=0),
             lambda q, _: q.claim(now=1), EVENT),
    Scenario("claim of an expired lease", lambda q: (q.enqueue("x", {}, now=0), q.claim(now=0)),
             lambda q, _: q.claim(now=5), EVENT_AUDIT),
    Scenario("claim that quarantines a spent head", _expired_spent,
             lambda q, _: q.claim(now=15), EVENT_AUDIT),
    Scenario("ack", _lease, lambda q, lease: q.ack(lease, now=1), EVENT),
    Scenario("retry", _lease, lambda q, lease: q.retry(lease, "later", now=1), EVENT_AUDIT),
    Scenario("fail", _lease, lambda q, lease: q.fail(lease, "bad", now=1), EVENT_AUDIT),
    Scenario("settle_many", _lease, lambda q, lease: q.settle_many([(lease, "retry", "x")], now=1),
             EVENT_AUDIT),
    Scenario("extend", _lease, lambda q, lease: q.extend(lease, 10, now=1), EVENT),
    Scenario("redrive", _quarantined,
             lambda q, lease: q.redrive("A1", expected_generation=lease.generation, reason="ok", now=1),
             EVENT_AUDIT),
    Scenario("set_weight of a new flow", lambda q: None, lambda q, _: q.set_weight("W", 3),
             [("flow", "INSERT")]),
    Scenario("set_weight of a known flow", lambda q: q.enqueue("x", {}, flow="W", now=0),
             lambda q, _: q.set_weight("W", 3), [("flow", "INSERT"), ("flow", "UPDATE")]),  # an upsert
]

CASES = [(s, table, op) for s in SCENARIOS for table, op in s.writes]


@pytest.mark.parametrize("scenario, table, op", CASES,
                         ids=[f"{s.name}-{t}-{op}" for s, t, op in CASES])
def test_a_failing_write_leaves_nothing_partial(make_queue, scenario: Scenario, table: str, op: str) -> None:
    q = make_queue()
    ctx = scenario.setup(q)
    conn = q._store.db.conn
    before = snapshot(conn)
    inject(conn, table, op)
    with pytest.raises(fairq.StoreError, match="injected failure"):
        scenario.act(q, ctx)
    assert snapshot(conn) == before
    assert not conn.in_transaction
    # With the fault gone, the same call goes through and changes the file.
    conn.execute("DROP TRIGGER temp.injected_failure")
    scenario.act(q, ctx)
    assert snapshot(conn) != before


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_declared_write_set_is_complete(make_queue, scenario: Scenario) -> None:
    # A trigger on a table/op outside the declared set never fires, so the
    # table above covers everything each verb writes.
    q = make_queue()
    ctx = scenario.setup(q)
    conn = q._store.db.conn
    declared = set(scenario.writes)
    for table in TABLES:
        for op in ("INSERT", "UPDATE", "DELETE"):
            if (table, op) not in declared:
                conn.execute(
                    f"CREATE TEMP TRIGGER undeclared_{table}_{op.lower()} BEFORE {op} ON main.{table} "
                    "BEGIN SELECT RAISE(ABORT, 'undeclared write'); END"
                )
    scenario.act(q, ctx)


def test_a_failing_receipt_insert_leaves_no_effect(tmp_path) -> None:
    receiver = Receiver(tmp_path / "receiver.db")
    conn = receiver.inbox._store.db.conn
    inject(conn, "fairq_receipt", "INSERT")
    lease = fairq.Lease("A1", "A", 1, {"delta": 4}, 1, 1, 1, None, 5.0)
    with pytest.raises(fairq.StoreError, match="injected failure"):
        receiver.send(lease)
    assert receiver.projection() == {}
    assert receiver.receipts() == 0
    receiver.close()


def test_a_failing_effect_write_leaves_no_receipt(tmp_path) -> None:
    receiver = Receiver(tmp_path / "receiver.db")
    conn = receiver.inbox._store.db.conn
    inject(conn, "projection", "INSERT")
    lease = fairq.Lease("A1", "A", 1, {"delta": 4}, 1, 1, 1, None, 5.0)
    with pytest.raises(sqlite3.IntegrityError, match="injected failure"):
        receiver.send(lease)
    assert receiver.receipts() == 0
    receiver.close()
