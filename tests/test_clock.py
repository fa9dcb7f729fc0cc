"""The stored clock never goes back; configuration and reads never move it."""

from __future__ import annotations

import sqlite3

import pytest

import fairq


def stored_clock(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT now_ms FROM clock").fetchone()[0]
    finally:
        conn.close()


def test_an_explicit_now_earlier_than_the_stored_clock_is_refused(q: fairq.Queue, db_path) -> None:
    q.enqueue("a", {}, now=10)
    with pytest.raises(fairq.ClockError) as info:
        q.enqueue("b", {}, now=9.999)
    assert (info.value.now, info.value.stored) == (9.999, 10.0)
    assert q.get("b") is None
    for call in (lambda: q.claim(now=9), lambda: q.claim_many(2, now=5)):
        with pytest.raises(fairq.ClockError):
            call()
    assert stored_clock(db_path) == 10_000


def test_a_system_clock_that_steps_back_is_clamped(make_queue, db_path) -> None:
    readings = iter([100.0, 40.0, 40.5])
    q = make_queue(clock=lambda: next(readings))
    q.enqueue("a", {})  # at 100
    lease = q.claim()  # the wall clock says 40: the call runs at 100
    assert lease.lease_until == 105.0
    assert q.ack(lease).state is fairq.State.ACKED  # still 100 < 105
    assert stored_clock(db_path) == 100_000
    assert q.get("a").settled_at == 100.0


def test_the_clock_moves_forward_with_each_write(q: fairq.Queue, db_path) -> None:
    q.enqueue("a", {}, now=1)
    lease = q.claim(now=2)
    q.extend(lease, now=3)
    q.ack(lease, now=4)
    assert stored_clock(db_path) == 4000


def test_configuration_and_reads_never_move_the_clock(q: fairq.Queue, db_path) -> None:
    q.enqueue("a", {}, flow="F", now=5)
    q.set_weight("F", 3)
    q.set_weight("G", 2)
    q.get("a")
    q.events()
    q.audit()
    q.stats(now=500)
    assert stored_clock(db_path) == 5000
    q.enqueue("b", {}, now=5)  # 5 is still a valid explicit time


def test_a_refused_call_does_not_move_the_clock(q: fairq.Queue, db_path) -> None:
    q.enqueue("x", {}, now=1)
    lease = q.claim(now=1)
    with pytest.raises(fairq.LeaseExpired):
        q.ack(lease, now=50)
    assert stored_clock(db_path) == 1000


def test_an_idle_claim_writes_nothing(q: fairq.Queue, db_path) -> None:
    q.enqueue("x", {}, now=0)
    q.claim(now=0)  # the only event is now leased until 5
    watcher = sqlite3.connect(db_path)
    before = watcher.execute("PRAGMA data_version").fetchone()[0]
    for t in (1, 2, 3):
        assert q.claim(now=t) is None
    # data_version changes when another connection commits a change.
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == before
    assert stored_clock(db_path) == 0
    assert q.claim(now=5).event_id == "x"  # the expired lease is taken over: that is stored
    assert watcher.execute("PRAGMA data_version").fetchone()[0] != before
    watcher.close()
