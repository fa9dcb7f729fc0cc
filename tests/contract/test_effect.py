"""A settle effect runs in the settle's transaction: effect and ACK commit together."""

from __future__ import annotations

import dataclasses

import pytest

import fairq


CREATE_EFFECTS = "CREATE TABLE effects (event_id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"


@pytest.fixture
def shop(q: fairq.Queue, store, target) -> fairq.Queue:
    store.sql(target, CREATE_EFFECTS)
    q.enqueue("E0001", {"amount": 10000}, now=0)
    return q


@pytest.fixture
def effects(store, target):
    """The rows the effects wrote, read through the store."""
    return lambda: [tuple(row) for row in store.sql(target, "SELECT event_id, amount FROM effects")]


def insert_effect(lease: fairq.Lease, store):
    def effect(conn) -> None:
        conn.execute(f"INSERT INTO effects VALUES ({store.param('id')}, {store.param('amount')})",
                     {"id": lease.event_id, "amount": lease.body["amount"]})
    return effect


def test_the_effect_and_the_ack_commit_together(shop: fairq.Queue, store, effects) -> None:
    lease = shop.claim(now=0)
    shop.ack(lease, effect=insert_effect(lease, store), now=1)
    assert effects() == [("E0001", 10000)]
    assert shop.get("E0001").state is fairq.State.ACKED


def test_a_raising_effect_rolls_everything_back_and_propagates(shop: fairq.Queue, store, effects) -> None:
    lease = shop.claim(now=0)

    def effect(conn) -> None:
        insert_effect(lease, store)(conn)
        raise KeyError("category")

    with pytest.raises(KeyError):
        shop.ack(lease, effect=effect, now=1)
    assert effects() == []
    assert shop.get("E0001").state is fairq.State.INFLIGHT


def test_the_effect_does_not_run_for_a_lost_lease(shop: fairq.Queue, effects) -> None:
    old = shop.claim(now=0)
    shop.claim(now=5)
    ran = []
    with pytest.raises(fairq.StaleLease):
        shop.ack(old, effect=lambda conn: ran.append(1), now=6)
    with pytest.raises(fairq.LeaseExpired):
        shop.ack(dataclasses.replace(old, generation=2), effect=lambda conn: ran.append(2), now=10)
    assert ran == [] and effects() == []


def test_a_lease_lost_while_the_effect_ran_rolls_the_effect_back(make_queue, store, target, effects) -> None:
    now = [0.0]
    q = make_queue(clock=lambda: now[0])
    store.sql(target, CREATE_EFFECTS)
    q.enqueue("E1", {"amount": 5})
    lease = q.claim()  # lease until 5

    def slow_effect(c) -> None:
        insert_effect(lease, store)(c)
        now[0] = 6.0  # the effect took six seconds

    with pytest.raises(fairq.LeaseExpired):
        q.ack(lease, effect=slow_effect)
    assert effects() == []
    assert q.get("E1").state is fairq.State.INFLIGHT


def test_a_queue_call_from_inside_its_own_effect_is_refused_clearly(shop: fairq.Queue) -> None:
    lease = shop.claim(now=0)
    with pytest.raises(fairq.FairqError, match="inside its own effect"):
        shop.ack(lease, effect=lambda conn: shop.get("E0001"), now=1)
    assert shop.get("E0001").state is fairq.State.INFLIGHT


def test_an_effect_can_go_with_a_retry_or_a_fail(shop: fairq.Queue, store, effects) -> None:
    lease = shop.claim(now=0)
    shop.retry(lease, "partial", effect=insert_effect(lease, store), now=1)
    assert effects() == [("E0001", 10000)]
    assert shop.get("E0001").state is fairq.State.READY


