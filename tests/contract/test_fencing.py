"""Only the current, unexpired holder can settle or extend."""

from __future__ import annotations

import dataclasses

import pytest

import fairq


def one_event(q: fairq.Queue) -> None:
    q.enqueue("A1", {"delta": 1}, flow="A", now=0)


def test_a_stale_lease_cannot_settle_after_reclaim(q: fairq.Queue) -> None:
    one_event(q)
    old = q.claim(owner="a", now=0)
    new = q.claim(owner="b", now=5)  # the old lease ended at 5
    assert (old.generation, new.generation) == (1, 2)
    with pytest.raises(fairq.StaleLease):
        q.ack(old, now=6)
    assert q.get("A1").state is fairq.State.INFLIGHT
    assert q.get("A1").owner == "b"
    assert q.ack(new, now=6).state is fairq.State.ACKED


def test_an_expired_lease_with_no_new_holder_is_refused(q: fairq.Queue) -> None:
    one_event(q)
    lease = q.claim(now=0)
    with pytest.raises(fairq.LeaseExpired) as info:
        q.ack(lease, now=5)  # now >= lease_until
    assert info.value.event_id == "A1" and info.value.generation == 1
    assert isinstance(info.value, fairq.LeaseLost)
    stored = q.get("A1")
    assert stored.state is fairq.State.INFLIGHT and stored.generation == 1


def test_the_generation_is_checked_before_the_time(q: fairq.Queue) -> None:
    one_event(q)
    old = q.claim(now=0)
    q.claim(now=5)
    # The old lease is both superseded and long expired: StaleLease wins.
    with pytest.raises(fairq.StaleLease):
        q.ack(old, now=100)


def test_a_lease_settles_once(q: fairq.Queue) -> None:
    one_event(q)
    lease = q.claim(now=0)
    q.ack(lease, now=1)
    with pytest.raises(fairq.StaleLease):
        q.ack(lease, now=1)
    with pytest.raises(fairq.StaleLease):
        q.retry(lease, "again", now=1)


def test_a_forged_generation_cannot_settle(q: fairq.Queue) -> None:
    one_event(q)
    lease = q.claim(now=0)
    forged = dataclasses.replace(lease, generation=lease.generation + 1)
    with pytest.raises(fairq.StaleLease):
        q.ack(forged, now=1)
    with pytest.raises(fairq.StaleLease):
        q.extend(forged, now=1)
    assert q.get("A1").state is fairq.State.INFLIGHT


def test_extend_moves_the_lease_and_is_fenced(q: fairq.Queue) -> None:
    one_event(q)
    lease = q.claim(now=0)
    extended = q.extend(lease, 10, now=4)
    assert extended.lease_until == 14 and extended.generation == lease.generation
    assert q.claim(now=13) is None  # still held
    assert q.ack(extended, now=13.5).state is fairq.State.ACKED


def test_extend_after_expiry_is_refused_and_changes_nothing(q: fairq.Queue) -> None:
    one_event(q)
    lease = q.claim(now=0)
    with pytest.raises(fairq.LeaseExpired):
        q.extend(lease, now=5)
    assert q.get("A1").lease_until == 5


def test_settling_an_unknown_event_is_stale(q: fairq.Queue) -> None:
    one_event(q)
    lease = q.claim(now=0)
    ghost = dataclasses.replace(lease, event_id="nope")
    with pytest.raises(fairq.StaleLease):
        q.ack(ghost, now=1)


def test_settle_many_reports_lost_leases_in_their_slots(q: fairq.Queue) -> None:
    for i in range(3):
        q.enqueue(f"e{i}", {}, now=0)
    leases = q.claim_many(3, now=0)
    stale = dataclasses.replace(leases[1], generation=9)
    results = q.settle_many([(leases[0], "ack"), (stale, "ack"), (leases[2], "fail", "bad")], now=1)
    assert isinstance(results[0], fairq.Settled) and results[0].state is fairq.State.ACKED
    assert isinstance(results[1], fairq.StaleLease)
    assert isinstance(results[2], fairq.Settled) and results[2].state is fairq.State.QUARANTINED
    assert q.get("e1").state is fairq.State.INFLIGHT


def test_settle_many_reports_expired_leases_and_settles_the_rest(q: fairq.Queue) -> None:
    q.enqueue("short", {}, now=0)
    q.enqueue("long", {}, now=0)
    short = q.claim(now=0, lease_seconds=1)
    long = q.claim(now=0, lease_seconds=10)
    results = q.settle_many([(short, "ack"), (long, "ack")], now=2)
    assert isinstance(results[0], fairq.LeaseExpired)
    assert results[1].state is fairq.State.ACKED


def test_the_same_lease_twice_in_one_batch_settles_once(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=0)
    lease = q.claim(now=0)
    first, second = q.settle_many([(lease, "ack"), (lease, "retry", "again")], now=1)
    assert first.state is fairq.State.ACKED
    assert isinstance(second, fairq.StaleLease)
    assert q.get("x").state is fairq.State.ACKED
    assert q.stats(now=1).totals["retried"] == 0
