"""Schedules: a tick or a schedule change is one transaction.

A TEMP trigger makes one write RAISE(ABORT); the call must surface the error
and leave the file exactly as before (no instance without its misfires and
position, no position without its instances).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairq import StoreError
from helpers import TABLES as QUEUE_TABLES
from helpers import inject, snapshot


TABLES = (*QUEUE_TABLES, "schedule")

# (name, setup, act, the writes act must make)
SCENARIOS: list[tuple[str, Callable, Callable, list[tuple[str, str]]]] = [
    ("tick with instances and misfires", lambda q: q.schedules.add("report", every=10, start=20),
     lambda q: q.tick(now=50),
     [("event", "INSERT"), ("flow", "INSERT"), ("audit", "INSERT"), ("schedule", "UPDATE"), ("queue_state", "UPDATE")]),
    ("tick ahead", lambda q: q.schedules.add("report", every=10, start=20, overlap=True),
     lambda q: q.tick(now=0, ahead=30),
     [("event", "INSERT"), ("schedule", "UPDATE"), ("queue_state", "UPDATE")]),
    ("schedules.add with a start", lambda q: None,
     lambda q: q.schedules.add("report", cron="@daily", tz="Asia/Tokyo", start=0), [("schedule", "INSERT")]),
    ("schedules.pause", lambda q: q.schedules.add("report", every=10, start=0),
     lambda q: q.schedules.pause("report"), [("schedule", "UPDATE")]),
    ("schedules.remove", lambda q: q.schedules.add("report", every=10, start=0),
     lambda q: q.schedules.remove("report"), [("schedule", "DELETE")]),
]
CASES = [(s, table, op) for s in SCENARIOS for table, op in s[3]]


@pytest.mark.parametrize("scenario, table, op", CASES, ids=[f"{s[0]}-{t}-{op}" for s, t, op in CASES])
def test_a_failing_schedule_write_leaves_nothing_partial(make_queue, scenario, table, op) -> None:
    _, setup, act, _ = scenario
    q = make_queue()
    setup(q)
    conn = q._store.db.conn
    before = snapshot(conn, TABLES)
    inject(conn, table, op)
    with pytest.raises(StoreError, match="injected failure"):
        act(q)
    assert snapshot(conn, TABLES) == before
    assert not conn.in_transaction
    conn.execute("DROP TRIGGER temp.injected_failure")
    act(q)
    assert snapshot(conn, TABLES) != before


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_the_declared_schedule_write_sets_are_complete(make_queue, scenario) -> None:
    _, setup, act, writes = scenario
    q = make_queue()
    setup(q)
    conn = q._store.db.conn
    for table in TABLES:
        for op in ("INSERT", "UPDATE", "DELETE"):
            if (table, op) not in writes:
                conn.execute(f"CREATE TEMP TRIGGER undeclared_{table}_{op.lower()} BEFORE {op} ON main.{table} "
                             "BEGIN SELECT RAISE(ABORT, 'undeclared write'); END")
    act(q)
