"""One family of errors: typed store failures, transient refusals, usage mistakes.

No sqlite3 exception of fairq's own statements escapes a public call (it
becomes a StoreError with the driver's error as __cause__); what an
application's own callback raises reaches the caller as it is; Busy and
Unavailable share a TransientError base; calls a program should never make
are UsageErrors; Schedules says "not found" one way.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import fairq
from fairq import errors

GUARANTEES = Path(__file__).resolve().parents[1] / "docs" / "guarantees.md"


def fail_writes_to(conn: sqlite3.Connection, table: str, op: str = "INSERT") -> None:
    conn.execute(f"CREATE TEMP TRIGGER injected_failure BEFORE {op} ON main.{table} "
                 "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")


def test_busy_and_unavailable_are_transient_and_keep_their_bases() -> None:
    for cls in (fairq.Busy, fairq.Unavailable):
        assert issubclass(cls, fairq.TransientError) and issubclass(cls, fairq.FairqError)
    assert issubclass(fairq.TransientError, fairq.FairqError)
    assert not issubclass(fairq.StoreError, fairq.TransientError)  # a failed statement is never a retry
    assert isinstance(fairq.Unavailable("http://x", "down"), fairq.TransientError)


def test_every_error_of_the_family_is_exported_and_in_the_docs_error_table() -> None:
    text = GUARANTEES.read_text(encoding="utf-8")
    table = text[text.index("## Errors"):text.index("## Not promised")]
    listed = set(re.findall(r"^\|[^|`]*`(\w+)`", table, re.M))
    for name in errors.__all__:
        assert getattr(fairq, name) is getattr(errors, name), name
        if name != "FairqError":
            assert name in listed, f"{name} is missing from the error table in docs/guarantees.md"


def test_a_failing_statement_of_a_write_is_a_store_error_with_the_driver_error_as_cause(
        make_queue) -> None:
    q = make_queue()
    fail_writes_to(q._store.db.conn, "event")
    with pytest.raises(fairq.StoreError, match="injected failure") as info:
        q.enqueue("a", {}, now=0)
    assert not isinstance(info.value, sqlite3.Error)
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert not q._store.db.conn.in_transaction
    assert q.events() == []


def test_a_failing_statement_of_a_read_is_a_store_error(make_queue, db_path) -> None:
    q = make_queue()
    q.enqueue("a", {}, now=0)
    other = sqlite3.connect(db_path)
    other.execute("ALTER TABLE audit RENAME TO audit_elsewhere")  # the read's table is gone
    other.close()
    with pytest.raises(fairq.StoreError, match="no such table") as info:
        q.audit("a")
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_a_failing_statement_under_an_outbox_call_is_a_store_error_and_the_transaction_stays(
        make_queue, db_path) -> None:
    q = make_queue()
    app = sqlite3.connect(db_path, isolation_level=None)
    fail_writes_to(app, "event")
    app.execute("BEGIN IMMEDIATE")
    with pytest.raises(fairq.StoreError, match="injected failure"):
        q.enqueue("a", {}, conn=app, now=0)
    assert app.in_transaction  # the application's to roll back or commit
    app.execute("ROLLBACK")
    app.close()


def test_an_effects_own_sqlite_error_reaches_the_caller_as_it_is(make_queue) -> None:
    q = make_queue()
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)

    def effect(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    with pytest.raises(sqlite3.OperationalError, match="no_such_table") as info:
        q.ack(lease, effect=effect, now=1)
    assert not isinstance(info.value, fairq.FairqError)
    assert q.get("a").state is fairq.State.INFLIGHT


def test_a_failing_receipt_write_is_a_store_error_but_an_applys_own_error_is_not(tmp_path) -> None:
    with fairq.Inbox(tmp_path / "in.db") as inbox:
        with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
            inbox.receive("a", "F", 1, {}, apply=lambda conn: conn.execute("SELECT * FROM no_such_table"))
        fail_writes_to(inbox._store.db.conn, "fairq_receipt")
        with pytest.raises(fairq.StoreError, match="injected failure"):
            inbox.receive("a", "F", 1, {})
        inbox._store.db.conn.execute("DROP TRIGGER temp.injected_failure")
        assert inbox.received() == 0


@pytest.mark.parametrize("ending", ["COMMIT", "ROLLBACK"])
def test_an_effect_that_commits_or_rolls_back_is_a_usage_error(make_queue, ending: str) -> None:
    q = make_queue()
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)
    with pytest.raises(fairq.UsageError, match="the transaction it runs in"):
        q.ack(lease, effect=lambda conn: conn.execute(ending), now=1)
    assert q.get("a").state is fairq.State.INFLIGHT


def test_an_apply_that_commits_is_a_usage_error(tmp_path) -> None:
    with fairq.Inbox(tmp_path / "in.db") as inbox:
        with pytest.raises(fairq.UsageError, match="the transaction it runs in"):
            inbox.receive("a", "F", 1, {}, apply=lambda conn: conn.execute("COMMIT"))
        assert inbox.received() == 0


def test_a_call_from_inside_its_own_effect_is_a_usage_error(make_queue) -> None:
    q = make_queue()
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)
    with pytest.raises(fairq.UsageError, match="inside its own effect"):
        q.ack(lease, effect=lambda conn: q.stats(now=1), now=1)
    assert q.get("a").state is fairq.State.INFLIGHT


def test_a_call_on_a_closed_inbox_is_a_usage_error(tmp_path) -> None:
    inbox = fairq.Inbox(tmp_path / "in.db")
    inbox.close()
    with pytest.raises(fairq.UsageError):
        inbox.received()


def test_schedules_say_not_found_one_way(make_queue) -> None:
    q = make_queue()
    for verb in (q.schedules.get, q.schedules.remove, q.schedules.pause, q.schedules.resume):
        with pytest.raises(fairq.UnknownSchedule, match="no schedule is called 'nope'") as info:
            verb("nope")
        assert info.value.field == "name" and isinstance(info.value, fairq.InvalidInput)
    q.schedules.add("report", every=60, start=0)
    assert q.schedules.remove("report") is None
    with pytest.raises(fairq.UnknownSchedule):
        q.schedules.remove("report")
