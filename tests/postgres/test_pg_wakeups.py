"""The sending side of wake-ups: a transaction that makes a head claimable now
notifies READY_CHANNEL once, at commit; one that only leaves work waiting
notifies DUE_CHANNEL with the earliest time it is due instead;
earliest_ready_ms says how long a worker may sleep."""

from __future__ import annotations

import pytest

import fairq
from fairq.stores.postgres import DUE_CHANNEL, READY_CHANNEL
from fairq.stores.postgres.store import PgStore
from pgcluster import require_psycopg

psycopg = require_psycopg()


#: A worker asleep: its listening connection holds this shared (fairq.stores.postgres.listen).
ASLEEP = "SELECT pg_advisory_lock_shared(26228, 0)"


@pytest.fixture
def listener(pg_url: str):
    """A listening connection of a worker that is asleep."""
    conn = psycopg.connect(pg_url, autocommit=True)
    conn.execute(f"LISTEN {READY_CHANNEL}")
    conn.execute(f"LISTEN {DUE_CHANNEL}")
    conn.execute(ASLEEP)
    yield conn
    conn.close()


def heard(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(channel, payload) of the notifications delivered so far (the timeout
    only stops the wait for a notification that is not coming)."""
    return [(n.channel, n.payload) for n in conn.notifies(timeout=0.5)]


def received(conn: psycopg.Connection) -> int:
    """Wake-ups (READY_CHANNEL notifications) delivered so far; due notices must not come."""
    notes = heard(conn)
    assert all(channel == READY_CHANNEL for channel, _ in notes), notes
    return len(notes)


def due_notices(conn: psycopg.Connection) -> list[int]:
    """The due times (ms) notified so far; wake-ups must not come."""
    notes = heard(conn)
    assert all(channel == DUE_CHANNEL for channel, _ in notes), notes
    return [int(payload) for _, payload in notes]


def test_work_claimable_now_wakes_listeners_and_waiting_work_does_not(pg_url: str, listener) -> None:
    with fairq.Queue(pg_url) as q:
        q.enqueue("later", {}, delay=3600)
        assert len(due_notices(listener)) == 1  # a due notice, not a wake-up
        q.enqueue_many([("a", {}, "F"), ("b", {}, "F"), ("c", {})])  # one transaction: one notification
        assert received(listener) == 1
        lease = q.claim()
        assert received(listener) == 0  # a claim makes nothing claimable
        q.ack(lease)  # F's next event becomes its head, claimable now
        assert received(listener) == 1
        lease = q.claim()
        q.retry(lease, "later", delay=3600)
        assert len(due_notices(listener)) == 1
        q.release(q.claim())
        assert received(listener) == 1


def test_a_wake_up_says_how_many_heads_became_claimable(pg_url: str, listener) -> None:
    # A listening process wakes that many of its idle workers, not every one.
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([("a", {}, "F"), ("b", {}, "F"), ("c", {}), ("d", {}, "G")])
        assert heard(listener) == [(READY_CHANNEL, "3")]  # F's head, c, G's head; b waits behind a
        leases = q.claim_many(3)
        assert heard(listener) == []
        q.settle_many([(lease, "ack") for lease in leases])
        assert heard(listener) == [(READY_CHANNEL, "1")]  # b is F's head now
        q.release(q.claim())
        assert heard(listener) == [(READY_CHANNEL, "1")]


def test_a_rolled_back_transaction_wakes_nobody(pg_url: str, listener) -> None:
    with fairq.Queue(pg_url) as q, psycopg.connect(pg_url) as app:
        app.execute("SELECT 1")  # the application's transaction is open
        q.enqueue("e", {}, conn=app)
        app.rollback()
        assert received(listener) == 0 and q.get("e") is None


def test_earliest_ready_ms_is_the_next_waiting_heads_time(pg_url: str) -> None:
    store = PgStore(pg_url, server_clock=False)  # the model clock, as the queue below
    try:
        assert store.earliest_ready_ms() is None
        with fairq.Queue(pg_url, clock="model") as q:
            q.enqueue("late", {}, flow="A", now=10, delay=50)
            q.enqueue("soon", {}, flow="B", now=10, delay=5)
            q.enqueue("behind", {}, flow="B", now=10, delay=1)  # waits behind its head: not counted
        assert store.earliest_ready_ms() == 15_000
    finally:
        store.close()


def test_work_left_waiting_notifies_the_earliest_time_it_is_due(pg_url: str, listener) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue_many([("a", {}, "A"), ("b", {}, "B")], now=10)
        assert received(listener) == 1
        # A delayed enqueue: one notice per transaction, the earliest of its heads.
        q.enqueue_many([{"event_id": "late", "body": {}, "flow": "L", "delay": 50},
                        {"event_id": "soon", "body": {}, "flow": "S", "delay": 5},
                        {"event_id": "behind", "body": {}, "flow": "A", "delay": 1}], now=10)
        assert due_notices(listener) == [15_000]
        # Backoffs: the earliest of a settle's.
        q.settle_many([(q.claim(now=10), "retry", "later", 7), (q.claim(now=10), "retry", "later", 3)], now=11)
        assert due_notices(listener) == [14_000]
        # An ack that uncovers a delayed event behind it.
        q.enqueue("after", {}, flow="C", now=12)
        q.enqueue("delayed-behind", {}, flow="C", delay=20, now=12)
        assert received(listener) == 1 and due_notices(listener) == []
        lease = q.claim(now=12)
        assert lease is not None and lease.event_id == "after"
        q.ack(lease, now=12)
        assert due_notices(listener) == [32_000]


def test_the_verbs_notify_only_while_some_worker_may_be_asleep(pg_url: str) -> None:
    """A NOTIFY makes notifying commits take turns: a claim, settle or extend sends
    none while no worker is asleep, and does once one is."""
    with fairq.Queue(pg_url, clock="model") as q, psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"LISTEN {READY_CHANNEL}")
        conn.execute(f"LISTEN {DUE_CHANNEL}")
        q.enqueue_many([(f"e{i}", {}, "F") for i in range(6)], now=10)
        heard(conn)
        q.ack(q.claim(now=10), now=10)  # F's next event becomes claimable: nobody asleep to tell
        q.retry(q.claim(now=10), "later", delay=5, now=10)  # due later: nobody asleep to tell
        assert heard(conn) == []
        conn.execute(ASLEEP)
        q.release(q.claim(now=20), now=20)
        q.retry(q.claim(now=20), "later", delay=5, now=20)
        assert heard(conn) == [(READY_CHANNEL, "1"), (DUE_CHANNEL, "25000")]
        conn.execute("SELECT pg_advisory_unlock_shared(26228, 0)")
        q.ack(q.claim(now=30), now=30)
        assert heard(conn) == []


def test_the_bookkeeping_as_an_older_fairq_calls_it_still_wakes_every_idle_worker(pg_url: str, listener) -> None:
    # A process of schema 4 or 5, still running beside an upgraded schema, passes p_notify.
    with fairq.Queue(pg_url), psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT fairq_bookkeep(false, false, 0, false, 0, 0, '{}'::text[], '{}'::bigint[], 0, "
                     "true, NULL::bigint)")
        assert heard(listener) == [(READY_CHANNEL, "")]
        conn.execute("SELECT fairq_bookkeep(false, false, 0, false, 0, 0, '{}'::text[], '{}'::bigint[], 0, "
                     "false, NULL::bigint)")
        assert heard(listener) == []
