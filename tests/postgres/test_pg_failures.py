"""What a driver failure becomes: each psycopg error of fairq's own statements
is a typed fairq error (the driver's error kept as __cause__), never a
success or a silent retry; an application's own error passes through."""

from __future__ import annotations

import pytest

import fairq
from fairq.stores.postgres.failures import from_application, typed
from pgcluster import require_psycopg

psycopg = require_psycopg()
errors = psycopg.errors


@pytest.mark.parametrize("driver_error, expected", [
    (errors.DeadlockDetected, fairq.TransientError),
    (errors.SerializationFailure, fairq.TransientError),
    (errors.AdminShutdown, fairq.Unavailable),
    (errors.CannotConnectNow, fairq.Unavailable),
    (errors.LockNotAvailable, fairq.Busy),
    (errors.ReadOnlySqlTransaction, fairq.ReadOnly),
    (errors.DiskFull, fairq.DiskFull),
    (errors.UniqueViolation, fairq.StoreError),
    (psycopg.OperationalError, fairq.Unavailable),
])
def test_each_driver_failure_becomes_its_fairq_error(driver_error: type, expected: type) -> None:
    found = typed(driver_error("boom"), "postgresql://host/db")
    assert type(found) is expected
    assert "boom" in str(found)


def test_a_deadlock_is_transient_but_never_a_busy_lock_wait() -> None:
    found = typed(errors.DeadlockDetected("deadlock detected"), "db")
    assert isinstance(found, fairq.TransientError) and not isinstance(found, fairq.Busy)
    assert "make the call again" in str(found)


def test_an_applications_own_driver_error_passes_through_as_it_is() -> None:
    own = errors.UniqueViolation("the application's")
    from_application(own)
    assert typed(own, "db") is None
    assert typed(ValueError("not a driver error"), "db") is None


def test_a_failing_statement_of_an_effect_reaches_the_caller_as_the_applications_error(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        q.enqueue("e", {})
        lease = q.claim()
        with pytest.raises(psycopg.errors.UndefinedTable):
            q.ack(lease, effect=lambda conn: conn.execute("INSERT INTO no_such_table VALUES (1)"))
        assert q.get("e").state is fairq.State.INFLIGHT
        q.ack(lease)  # the failed effect left the queue usable
        assert q.get("e").state is fairq.State.ACKED


def test_an_effect_that_swallows_its_own_failure_cannot_let_the_settle_commit(pg_url: str) -> None:
    def careless(conn) -> None:
        try:
            conn.execute("INSERT INTO no_such_table VALUES (1)")
        except psycopg.Error:
            pass  # the transaction is broken now

    with fairq.Queue(pg_url) as q:
        q.enqueue("e", {})
        lease = q.claim()
        with pytest.raises(fairq.UsageError, match="broke the transaction"):
            q.ack(lease, effect=careless)
        assert q.get("e").state is fairq.State.INFLIGHT
