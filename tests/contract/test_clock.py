"""The stored clock never goes back by itself; configuration and reads never move it;
a mistaken future time is refused, and an audited reset recovers from one."""

from __future__ import annotations

import time

import pytest

import fairq
from helpers import stored_clock


def test_an_explicit_now_earlier_than_the_stored_clock_is_refused(q: fairq.Queue) -> None:
    q.enqueue("a", {}, now=10)
    with pytest.raises(fairq.ClockError) as info:
        q.enqueue("b", {}, now=9.999)
    assert (info.value.now, info.value.stored) == (9.999, 10.0)
    assert q.get("b") is None
    for call in (lambda: q.claim(now=9), lambda: q.claim_many(2, now=5)):
        with pytest.raises(fairq.ClockError):
            call()
    assert stored_clock(q) == 10_000


def test_a_system_clock_that_steps_back_is_clamped(make_queue) -> None:
    readings = iter([100.0, 40.0, 40.5])
    q = make_queue(clock=lambda: next(readings))
    q.enqueue("a", {})  # at 100
    lease = q.claim()  # the wall clock says 40: the call runs at 100
    assert lease.lease_until == 105.0
    assert q.ack(lease).state is fairq.State.ACKED  # still 100 < 105
    assert stored_clock(q) == 100_000
    assert q.get("a").settled_at == 100.0


def test_the_clock_moves_forward_with_each_write(q: fairq.Queue) -> None:
    q.enqueue("a", {}, now=1)
    lease = q.claim(now=2)
    q.extend(lease, now=3)
    q.ack(lease, now=4)
    assert stored_clock(q) == 4000


def test_configuration_and_reads_never_move_the_clock(q: fairq.Queue) -> None:
    q.enqueue("a", {}, flow="F", now=5)
    q.set_weight("F", 3)
    q.set_weight("G", 2)
    q.get("a")
    q.events()
    q.audit()
    q.stats(now=500)
    assert stored_clock(q) == 5000
    q.enqueue("b", {}, now=5)  # 5 is still a valid explicit time


def test_a_refused_call_does_not_move_the_clock(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=1)
    lease = q.claim(now=1)
    with pytest.raises(fairq.LeaseExpired):
        q.ack(lease, now=50)
    assert stored_clock(q) == 1000


def test_an_idle_claim_writes_nothing(q: fairq.Queue, store, target) -> None:
    q.enqueue("x", {}, now=0)
    q.claim(now=0)  # the only event is now leased until 5
    before = store.snapshot(target)
    for t in (1, 2, 3):
        assert q.claim(now=t) is None
    assert store.snapshot(target) == before  # not even the clock moved
    assert q.claim(now=5).event_id == "x"  # the expired lease is taken over: that is stored
    assert store.snapshot(target) != before


# -- a mistaken future time cannot stop the queue ------------------------------------------


@pytest.mark.parametrize("call", [
    pytest.param(lambda q, t: q.enqueue("late", {}, now=t), id="enqueue"),
    pytest.param(lambda q, t: q.claim(now=t), id="claim"),
    pytest.param(lambda q, t: q.tick(now=t), id="tick"),
    pytest.param(lambda q, t: q.stats(now=t), id="stats"),
])
def test_an_explicit_time_far_ahead_of_the_system_clock_is_refused(store, target, call) -> None:
    with store.open(target) as q:  # the system clock, the default bound
        q.enqueue("a", {}, now=time.time())
        before = stored_clock(q)
        with pytest.raises(fairq.InvalidInput) as info:
            call(q, 9.9e10)  # the year 5107
        assert info.value.field == "now" and "max_clock_skew=300" in str(info.value)
        with pytest.raises(fairq.InvalidInput):
            call(q, time.time() + 86_400)  # a wall clock a day ahead
        assert stored_clock(q) == before and q.get("late") is None
        call(q, time.time() + 60)  # within the bound


@pytest.mark.parametrize("bad", [float("nan"), -1.0, 1e12, 253_402_300_800.0])
def test_absurd_times_are_refused_even_on_a_model_clock(make_queue, bad) -> None:
    q = make_queue(clock=lambda: 0.0)
    with pytest.raises(fairq.InvalidInput) as info:
        q.enqueue("a", {}, now=bad)
    assert info.value.field == "now"


def test_a_model_clock_takes_any_explicit_time_unless_a_bound_is_given(make_queue, store, target) -> None:
    q = make_queue(clock=lambda: 100.0)
    assert q.max_clock_skew is None
    q.enqueue("a", {}, now=1e6)
    bounded = make_queue(clock=lambda: 1e6, max_clock_skew=10)
    with pytest.raises(fairq.InvalidInput):
        bounded.enqueue("b", {}, now=1e6 + 10.5)
    bounded.enqueue("b", {}, now=1e6 + 10)
    assert store.open(target, **bounded.settings()).max_clock_skew == 10
    with pytest.raises(fairq.InvalidInput) as info:
        make_queue(max_clock_skew=-1)
    assert info.value.field == "max_clock_skew"


def jumped_queue(make_queue):
    """A queue whose wall clock jumped a day ahead for a few calls and was corrected."""
    wall = [1000.0]
    q = make_queue(clock=lambda: wall[0])
    q.enqueue("held", {}, flow="A")
    q.enqueue("failing", {}, flow="B")
    q.enqueue("behind", {}, flow="B")
    wall[0] += 86_400  # the jump
    held = q.claim()  # until 87_405
    failing = q.claim()
    q.retry(failing, "flaky")  # backoff 2 s: ready at 87_402
    q.enqueue("delayed", {}, delay=30)  # ready at 87_430
    q.enqueue("fresh", {}, flow="C")  # ready at 87_400
    wall[0] = 1001.0  # corrected
    return q, wall, held


def test_after_a_corrected_clock_jump_the_queue_stands_still(make_queue) -> None:
    q, wall, held = jumped_queue(make_queue)
    wall[0] = 1100.0
    # Calls run at the stored clock: leases and backoffs wait for the real clock.
    assert [lease.event_id for lease in q.claim_many(5)] == ["fresh"]
    with pytest.raises(fairq.ClockError):
        q.ack(held, now=1100.0)


def test_a_clock_reset_moves_the_clock_and_every_time_beyond_it_back(make_queue) -> None:
    q, wall, held = jumped_queue(make_queue)
    done = q.reset_clock(reason="wall clock was a day ahead", actor="ops")
    assert (done.before, done.after, done.leases, done.waits) == (87_400.0, 1001.0, 1, 3)
    assert stored_clock(q) == 1_001_000
    assert q.get("held").lease_until == 1006.0  # 5 s left, as before the reset
    assert q.get("failing").next_at == 1003.0
    assert q.get("delayed").next_at == 1031.0
    assert q.get("behind").next_at == 1000.0  # a time not beyond the new clock is untouched
    (row,) = [a for a in q.audit() if a.action == "clock_reset"]
    assert (row.event_id, row.reason, row.actor, row.at) == ("", "wall clock was a day ahead", "ops", 1001.0)
    assert row.detail == {"from": 87_400.0, "to": 1001.0, "leases": 1, "waits": 3}
    # The holder keeps its lease to its (moved) end, and explicit times at the real clock work.
    assert q.extend(held, 5, now=1002.0).lease_until == 1007.0
    assert q.claim().event_id == "fresh"  # ready at the new clock
    wall[0] = 1003.0
    assert q.claim().event_id == "failing"


def test_a_lease_pulled_back_by_a_reset_is_still_fenced_by_generation(make_queue) -> None:
    q, wall, held = jumped_queue(make_queue)
    q.reset_clock(reason="clock jumped")
    wall[0] = 1010.0  # past the moved lease end: the next claim takes the event over
    taken = [lease for lease in q.claim_many(5) if lease.event_id == "held"]
    assert taken and taken[0].generation == held.generation + 1
    with pytest.raises(fairq.StaleLease):
        q.ack(held)
    assert q.ack(taken[0]).state is fairq.State.ACKED


def test_a_reset_of_a_clock_that_is_not_ahead_changes_nothing(make_queue) -> None:
    q = make_queue(clock=lambda: 50.0)
    q.enqueue("a", {}, now=10)
    done = q.reset_clock(reason="just checking")
    assert (done.before, done.after, done.leases, done.waits) == (10.0, 10.0, 0, 0)
    assert q.audit() == [] and stored_clock(q) == 10_000
    with pytest.raises(fairq.InvalidInput) as info:
        q.reset_clock(reason=" ")
    assert info.value.field == "reason"


def test_a_schedule_ticked_at_a_jumped_time_restarts_from_now_after_a_reset(make_queue) -> None:
    wall = [1000.0]
    q = make_queue(clock=lambda: wall[0])
    q.schedules.add("report", every=60, start=960, misfire="coalesce")
    wall[0] += 86_400
    q.tick()
    wall[0] = 1001.0
    q.reset_clock(reason="clock jumped")
    assert q.schedules.get("report").next_slot > wall[0] + 3600  # slots were decided far ahead
    q.schedules.remove("report")
    q.schedules.add("report", every=60, misfire="coalesce")
    assert q.schedules.get("report").next_slot == 1001.0
    assert [e.event_id for e in q.tick()] == ["report@1970-01-01T00:16:41Z"]
