"""The sending side of wake-ups: a transaction that makes a head claimable now
notifies READY_CHANNEL once, at commit; one that only leaves work waiting does
not; earliest_ready_ms says how long a worker may sleep."""

from __future__ import annotations

import pytest

import fairq
from fairq.postgres import READY_CHANNEL
from fairq.postgres.store import PgStore
from pgcluster import require_psycopg

psycopg = require_psycopg()


@pytest.fixture
def listener(pg_url: str):
    conn = psycopg.connect(pg_url, autocommit=True)
    conn.execute(f"LISTEN {READY_CHANNEL}")
    yield conn
    conn.close()


def received(conn: psycopg.Connection) -> int:
    """Notifications delivered so far (the timeout only stops the wait for a
    notification that is not coming)."""
    return sum(1 for _ in conn.notifies(timeout=0.5))


def test_work_claimable_now_wakes_listeners_and_waiting_work_does_not(pg_url: str, listener) -> None:
    with fairq.Queue(pg_url) as q:
        q.enqueue("later", {}, delay=3600)
        q.enqueue_many([("a", {}, "F"), ("b", {}, "F"), ("c", {})])  # one transaction: one notification
        assert received(listener) == 1
        lease = q.claim()
        assert received(listener) == 0  # a claim makes nothing claimable
        q.ack(lease)  # F's next event becomes its head, claimable now
        assert received(listener) == 1
        lease = q.claim()
        q.retry(lease, "later", delay=3600)
        assert received(listener) == 0
        q.release(q.claim())
        assert received(listener) == 1


def test_a_rolled_back_transaction_wakes_nobody(pg_url: str, listener) -> None:
    with fairq.Queue(pg_url) as q, psycopg.connect(pg_url) as app:
        app.execute("SELECT 1")  # the application's transaction is open
        q.enqueue("e", {}, conn=app)
        app.rollback()
        assert received(listener) == 0 and q.get("e") is None


def test_earliest_ready_ms_is_the_next_waiting_heads_time(pg_url: str) -> None:
    store = PgStore(pg_url)
    try:
        assert store.earliest_ready_ms() is None
        with fairq.Queue(pg_url, clock="model") as q:
            q.enqueue("late", {}, flow="A", now=10, delay=50)
            q.enqueue("soon", {}, flow="B", now=10, delay=5)
            q.enqueue("behind", {}, flow="B", now=10, delay=1)  # waits behind its head: not counted
        assert store.earliest_ready_ms() == 15_000
    finally:
        store.close()
