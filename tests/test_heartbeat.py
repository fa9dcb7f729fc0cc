"""Heartbeats: a slow handler keeps its lease; a lost lease is told and never settled;
a heartbeat error costs no finished work.

Time here is driven by the test, not the machine: the queues read a manual
clock, and the heartbeat's sleep is a Beats, so each beat() runs exactly one
round of extends. A stalled machine can delay a test but not change what it
sees. A "thief" is a second connection whose explicit clock runs ahead, so it
sees the lease as expired and claims the event again: the worker's lease is
then stale.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator

import pytest

import fairq
from fairq.worker import Heartbeat
from helpers import Clock

HANG = 30.0  # seconds; only to stop a hung test


class Beats:
    """The heartbeat's sleep, driven by the test: beat() ends one sleep and
    returns once that round of extends is over (the heartbeat sleeps again)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._asleep = 0  # sleeps begun
        self._allowed = 0  # sleeps allowed to end

    def sleep(self, seconds: float) -> None:
        with self._cond:
            self._asleep += 1
            n = self._asleep
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._allowed >= n, timeout=HANG)

    def beat(self) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self._asleep > self._allowed, timeout=HANG)
            self._allowed += 1
            self._cond.notify_all()
            assert self._cond.wait_for(lambda: self._asleep > self._allowed, timeout=HANG)

    def free(self) -> None:
        """Let every sleep end at once (the heartbeat thread then exits when nothing is held)."""
        with self._cond:
            self._allowed = 1 << 60
            self._cond.notify_all()


@pytest.fixture
def beats() -> Iterator[Beats]:
    b = Beats()
    yield b
    b.free()


def driven(worker: fairq.Worker, beats: Beats) -> fairq.Worker:
    """The worker, its heartbeat sleeping on `beats`."""
    worker._heartbeat = Heartbeat(worker.queue, worker.lease_seconds, sleep=beats.sleep, settle=worker._settle)
    return worker


def test_a_heartbeat_keeps_a_slow_handlers_lease_alive(make_queue, beats) -> None:
    clock = Clock(1_000_000.0)
    q = make_queue(lease_seconds=0.6, clock=clock)
    other = make_queue(lease_seconds=0.6, clock=clock)
    q.enqueue("slow", {})
    seen = {}

    def handler(job: fairq.Job) -> None:
        first = job.lease.lease_until
        for _ in range(5):  # 2 s in all: more than three leases
            clock.advance(0.4)  # two thirds of a lease between beats
            beats.beat()
            assert other.claim() is None  # the lease never lapses, so nobody can take over
        seen["extended"] = job.lease.lease_until - first
        seen["lost"] = job.lost

    [handled] = driven(fairq.Worker(q, handler), beats).step()
    assert handled.settled.state is fairq.State.ACKED
    assert seen == {"extended": pytest.approx(2.0), "lost": False}
    assert q.stats().totals["expired"] == 0
    assert q.audit("slow") == []


def test_without_a_beat_the_same_lease_lapses(make_queue, beats) -> None:
    # The control for the test above: the same time without a beat loses the event.
    clock = Clock(1_000_000.0)
    q = make_queue(lease_seconds=0.6, clock=clock)
    other = make_queue(lease_seconds=0.6, clock=clock)
    q.enqueue("slow", {})
    taken = []

    def handler(job: fairq.Job) -> None:
        clock.advance(0.8)
        taken.append(other.claim(owner="other"))

    [handled] = driven(fairq.Worker(q, handler), beats).step()
    assert taken[0].event_id == "slow"
    assert isinstance(handled.lost, fairq.StaleLease) and handled.settled is None


def test_a_lost_lease_is_told_to_the_handler_and_not_settled(make_queue, beats) -> None:
    q = make_queue(lease_seconds=30)
    thief = make_queue(lease_seconds=30)  # the file's policy; its claims ask for 60
    q.enqueue("e", {})
    seen = {}

    def handler(job: fairq.Job) -> None:
        seen["stolen"] = thief.claim(owner="thief", now=time.time() + 100, lease_seconds=60)
        assert not job.lost
        beats.beat()
        seen["lost"] = job.lost
        with pytest.raises(fairq.StaleLease):
            job.check()

    worker = driven(fairq.Worker(q, handler), beats)
    [handled] = worker.step()
    assert seen["lost"] is True
    assert handled.settled is None and isinstance(handled.lost, fairq.StaleLease)
    assert handled.outcome is fairq.ACK  # what the handler decided; it was not written
    info = q.get("e")
    assert (info.state, info.generation, info.owner) == (fairq.State.INFLIGHT, 2, "thief")
    assert worker.counts()["lost"] == 1 and worker.counts()["acked"] == 0
    assert thief.ack(seen["stolen"], now=time.time() + 100).state is fairq.State.ACKED


def test_a_handler_that_gives_up_with_check_is_not_retried(make_queue, beats) -> None:
    q = make_queue(lease_seconds=30)
    thief = make_queue(lease_seconds=30)  # the file's policy; its claims ask for 60
    q.enqueue("e", {})

    def handler(job: fairq.Job) -> None:
        thief.claim(owner="thief", now=time.time() + 100, lease_seconds=60)
        beats.beat()
        job.check()  # raises StaleLease: the heartbeat has met it

    [handled] = driven(fairq.Worker(q, handler), beats).step()
    assert isinstance(handled.lost, fairq.StaleLease) and handled.settled is None
    assert [a.action for a in q.audit("e")] == ["expired"]  # the theft; no retry was recorded
    assert q.get("e").owner == "thief"


def test_a_lease_lost_before_the_settle_is_reported_not_raised(make_queue) -> None:
    q = make_queue(lease_seconds=30)  # no heartbeat comes in time: the settle's fence finds it
    thief = make_queue(lease_seconds=30)  # the file's policy; its claims ask for 60
    q.enqueue("e", {})
    [handled] = fairq.Worker(
        q, lambda job: thief.claim(owner="thief", now=time.time() + 100, lease_seconds=60)).step()
    assert isinstance(handled.lost, fairq.LeaseLost) and handled.settled is None
    assert q.get("e").owner == "thief"


def test_one_heartbeat_serves_every_thread_of_a_worker(make_queue, beats, monkeypatch) -> None:
    clock = Clock(1_000_000.0)
    q = make_queue(lease_seconds=0.6, clock=clock)
    q.enqueue_many([(f"e{i}", {}) for i in range(4)])
    extended_by = []
    extend = q.extend

    def recorded(lease, seconds=None):
        extended_by.append(threading.get_ident())
        return extend(lease, seconds)

    monkeypatch.setattr(q, "extend", recorded)
    all_running = threading.Barrier(5, timeout=HANG)  # four handlers and the driver
    done = threading.Event()

    def handler(job: fairq.Job) -> None:
        all_running.wait()
        done.wait(HANG)

    def drive() -> None:
        all_running.wait()
        for _ in range(3):  # 1.2 s: two leases; only extension keeps them
            clock.advance(0.4)
            beats.beat()
        done.set()

    threading.Thread(target=drive, daemon=True).start()
    counts = driven(fairq.Worker(q, handler, concurrency=4), beats).run(until_idle=True)
    assert counts["acked"] == 4 and counts["lost"] == 0
    # Each beat extended all four leases, all from one thread.
    assert len(extended_by) == 12 and len(set(extended_by)) == 1
    assert q.stats().totals["expired"] == 0


def test_a_busy_heartbeat_tries_again_at_the_next_beat(make_queue, beats, monkeypatch) -> None:
    clock = Clock(1_000_000.0)
    q = make_queue(lease_seconds=0.6, clock=clock)
    q.enqueue("e", {})
    calls = []
    extend = q.extend

    def busy_once(lease, seconds=None):
        calls.append(lease.event_id)
        if len(calls) == 1:
            raise fairq.Busy("database is locked")
        return extend(lease, seconds)

    monkeypatch.setattr(q, "extend", busy_once)

    def handler(job: fairq.Job) -> None:
        clock.advance(0.2)
        beats.beat()  # Busy: nothing changes, the heartbeat goes on
        assert not job.lost
        clock.advance(0.2)
        beats.beat()
        assert job.lease.lease_until == pytest.approx(clock.now + 0.6)

    worker = driven(fairq.Worker(q, handler), beats)
    [handled] = worker.step()  # no error: Busy was transient
    assert calls == ["e", "e"]
    assert handled.settled.state is fairq.State.ACKED


def test_a_heartbeat_error_is_raised_after_the_batch_is_settled(make_queue, beats, monkeypatch) -> None:
    q = make_queue(lease_seconds=30)
    q.enqueue_many([("e1", {}), ("e2", {})])

    def failing(lease, seconds=None):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(q, "extend", failing)

    def handler(job: fairq.Job) -> None:
        if job.event_id == "e1":
            beats.beat()

    worker = driven(fairq.Worker(q, handler, batch=2), beats)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        worker.step()
    # The finished handlers' outcomes were written first: nothing runs twice.
    assert q.get("e1").state is fairq.State.ACKED and q.get("e2").state is fairq.State.ACKED
    assert worker.counts()["acked"] == 2


def test_a_heartbeat_error_is_raised_by_the_step_that_holds_the_job(make_queue, beats, monkeypatch) -> None:
    q = make_queue(lease_seconds=30)
    q.enqueue_many([("mine", {}), ("theirs", {})])
    extend = q.extend

    def failing_for_mine(lease, seconds=None):
        if lease.event_id == "mine":
            raise sqlite3.OperationalError("disk I/O error")
        return extend(lease, seconds)

    monkeypatch.setattr(q, "extend", failing_for_mine)
    both_running = threading.Barrier(3, timeout=HANG)  # two handlers and the test
    finish = {"mine": threading.Event(), "theirs": threading.Event()}

    def handler(job: fairq.Job) -> None:
        both_running.wait()
        finish[job.event_id].wait(HANG)

    worker = driven(fairq.Worker(q, handler), beats)
    results: dict[str, object] = {}

    def step(name: str) -> None:
        try:
            results[name] = worker.step()
        except Exception as exc:
            results[name] = exc

    threads = [threading.Thread(target=step, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    both_running.wait()
    beats.beat()  # extends both: "mine" fails, "theirs" is extended
    finish["theirs"].set()
    deadline = time.monotonic() + HANG
    while not results and time.monotonic() < deadline:  # the step holding "theirs" ends first
        time.sleep(0.01)
    finish["mine"].set()
    for t in threads:
        t.join(HANG)
    errors = [r for r in results.values() if isinstance(r, Exception)]
    [handled] = [h for r in results.values() if isinstance(r, list) for h in r]
    assert len(errors) == 1 and isinstance(errors[0], sqlite3.OperationalError)
    assert handled.event_id == "theirs" and handled.settled.state is fairq.State.ACKED
    assert q.get("mine").state is fairq.State.ACKED


def test_an_extend_that_fails_while_the_batch_is_being_settled_is_still_raised(make_queue, beats,
                                                                                 monkeypatch) -> None:
    """An extend already running when the handler finishes may fail after the worker
    collected its batch: the worker still raises that error once its settle is written."""
    q = make_queue(lease_seconds=30)
    q.enqueue("e1", {})
    extending, settling, failed = threading.Event(), threading.Event(), threading.Event()
    real_settle_many = q.settle_many

    def extend(lease, seconds=None):  # the beat's extend: fails while the worker settles
        extending.set()
        assert settling.wait(HANG)
        failed.set()
        raise fairq.StoreError("q.db", "injected: the extend failed")

    def settle_many(items, **kw):
        settling.set()
        assert failed.wait(HANG)
        time.sleep(0.05)  # the heartbeat records the error it just met
        return real_settle_many(items, **kw)

    monkeypatch.setattr(q, "extend", extend)
    monkeypatch.setattr(q, "settle_many", settle_many)

    def handler(job: fairq.Job) -> None:
        threading.Thread(target=beats.beat, daemon=True).start()  # one round of extends, in the background
        assert extending.wait(HANG)  # the extend is under way when the handler returns

    worker = driven(fairq.Worker(q, handler), beats)
    with pytest.raises(fairq.StoreError, match="injected"):
        worker.step()
    assert q.get("e1").state is fairq.State.ACKED  # the finished handler's ack was written first
