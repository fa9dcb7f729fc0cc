"""Outbox: an application enqueues inside its own transaction, on its own connection.

Its business write and the event commit together or not at all; fairq never
commits or rolls back the application's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import fairq
from helpers import place_order


@pytest.fixture
def app(store, target, q: fairq.Queue) -> Iterator[Any]:
    """The application's own connection to the queue's database, with its own table."""
    conn = store.app_connection(target)
    conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, cents INTEGER NOT NULL CHECK (cents > 0))")
    yield conn
    conn.close()


@pytest.fixture
def orders(store, target):
    """The application's committed orders, read on another connection."""
    return lambda: [tuple(row) for row in store.sql(target, "SELECT id, cents FROM orders ORDER BY id")]


def test_the_business_row_and_the_event_commit_together(q: fairq.Queue, store, app, orders) -> None:
    place_order(q, app, "o1", 500, begin=store.BEGIN, param=store.param)
    assert orders() == [("o1", 500)]
    assert q.get("paid-o1").body == {"cents": 500, "order": "o1"}
    assert q.claim(now=1).event_id == "paid-o1"


def test_a_failing_business_write_leaves_no_event(q: fairq.Queue, store, app, orders) -> None:
    app.execute(store.BEGIN)
    q.enqueue("paid-o1", {"cents": -5}, conn=app, now=1)
    with pytest.raises(store.IntegrityError):
        app.execute("INSERT INTO orders VALUES ('o1', -5)")  # the CHECK refuses it
    app.execute("ROLLBACK")
    assert q.get("paid-o1") is None
    stats = q.stats(now=1)
    assert stats.counts["ready"] == 0 and stats.totals["enqueued"] == 0
    assert orders() == []


def test_a_conflicting_event_leaves_no_business_row(q: fairq.Queue, store, app, orders) -> None:
    q.enqueue("paid-o1", {"order": "o1", "cents": 999}, now=0)
    with pytest.raises(fairq.Conflict):
        place_order(q, app, "o1", 500, begin=store.BEGIN, param=store.param)
    assert orders() == []
    assert q.get("paid-o1").body == {"cents": 999, "order": "o1"}


def test_an_effect_cannot_enqueue_on_the_settles_own_connection(q: fairq.Queue) -> None:
    # The settle already holds that transaction and its clock row; a second
    # fairq call inside it would write the clock behind the first one's back.
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)
    with pytest.raises(fairq.InvalidInput, match="fairq's own connection"):
        q.ack(lease, effect=lambda conn: q.enqueue("follow-up", {}, conn=conn), now=1)
    assert q.get("follow-up") is None and q.get("a").state is fairq.State.INFLIGHT


def test_an_event_enqueued_in_the_applications_transaction_keeps_its_kind_and_policy(
        q: fairq.Queue, store, app) -> None:
    app.execute(store.BEGIN)
    q.enqueue("mail-1", {"to": "a@b"}, kind="send_email", max_attempts=2, timeout=4,
              backoff={"base": 6, "jitter": False}, conn=app, now=1)
    app.execute("COMMIT")
    lease = q.claim(now=1)
    assert (lease.event_id, lease.kind, lease.timeout) == ("mail-1", "send_email", 4.0)
    assert q.retry(lease, "smtp down", now=1).next_at == 7
    assert q.retry(q.claim(now=7), "smtp down", now=7).state is fairq.State.QUARANTINED
