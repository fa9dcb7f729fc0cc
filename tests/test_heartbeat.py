"""Heartbeats: a slow handler keeps its lease; a lost lease is told and never settled.

Leases here are real seconds (0.6 s), extended every 0.2 s. A "thief" is a
second connection whose explicit clock runs ahead, so it sees the lease as
expired and claims the event again: the worker's lease is then stale.
"""

from __future__ import annotations

import threading
import time

import pytest

import fairq

HANG = 5.0  # seconds; only to stop a hung handler


def test_a_heartbeat_keeps_a_slow_handlers_lease_alive(make_queue) -> None:
    q = make_queue(lease_seconds=0.6)
    other = make_queue(lease_seconds=0.6)
    q.enqueue("slow", {})
    seen = {}

    def handler(job: fairq.Job) -> None:
        first = job.lease.lease_until
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert other.claim() is None  # the lease never lapses, so nobody can take over
            time.sleep(0.05)
        seen["extended"] = job.lease.lease_until - first
        seen["lost"] = job.lost

    [handled] = fairq.Worker(q, handler).step()
    assert handled.settled.state is fairq.State.ACKED
    assert seen == {"extended": pytest.approx(1.4, abs=0.4), "lost": False}
    assert q.stats().totals["expired"] == 0
    assert q.audit("slow") == []


def test_a_lost_lease_is_told_to_the_handler_and_not_settled(make_queue) -> None:
    q = make_queue(lease_seconds=0.3)
    thief = make_queue(lease_seconds=60)
    q.enqueue("e", {})
    seen = {}

    def handler(job: fairq.Job) -> None:
        seen["stolen"] = thief.claim(owner="thief", now=time.time() + 10)
        deadline = time.monotonic() + HANG
        while not job.lost and time.monotonic() < deadline:
            time.sleep(0.01)
        seen["lost"] = job.lost
        with pytest.raises(fairq.StaleLease):
            job.check()

    worker = fairq.Worker(q, handler)
    [handled] = worker.step()
    assert seen["lost"] is True
    assert handled.settled is None and isinstance(handled.lost, fairq.StaleLease)
    assert handled.outcome is fairq.ACK  # what the handler decided; it was not written
    info = q.get("e")
    assert (info.state, info.generation, info.owner) == (fairq.State.INFLIGHT, 2, "thief")
    assert worker.counts()["lost"] == 1 and worker.counts()["acked"] == 0
    assert thief.ack(seen["stolen"], now=time.time() + 10).state is fairq.State.ACKED


def test_a_handler_that_gives_up_with_check_is_not_retried(make_queue) -> None:
    q = make_queue(lease_seconds=0.3)
    thief = make_queue(lease_seconds=60)
    q.enqueue("e", {})

    def handler(job: fairq.Job) -> None:
        thief.claim(owner="thief", now=time.time() + 10)
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            job.check()  # raises StaleLease once the heartbeat has met it
            time.sleep(0.01)

    [handled] = fairq.Worker(q, handler).step()
    assert isinstance(handled.lost, fairq.StaleLease) and handled.settled is None
    assert [a.action for a in q.audit("e")] == ["expired"]  # the theft; no retry was recorded
    assert q.get("e").owner == "thief"


def test_a_lease_lost_before_the_settle_is_reported_not_raised(make_queue) -> None:
    q = make_queue(lease_seconds=30)  # no heartbeat comes in time: the settle's fence finds it
    thief = make_queue(lease_seconds=60)
    q.enqueue("e", {})
    [handled] = fairq.Worker(q, lambda job: thief.claim(owner="thief", now=time.time() + 100)).step()
    assert isinstance(handled.lost, fairq.LeaseLost) and handled.settled is None
    assert q.get("e").owner == "thief"


def test_one_heartbeat_serves_every_thread_of_a_worker(make_queue) -> None:
    q = make_queue(lease_seconds=0.6)
    q.enqueue_many([(f"e{i}", {}) for i in range(4)])
    lock = threading.Lock()
    threads = set()

    def handler(job: fairq.Job) -> None:
        time.sleep(1.2)  # two lease lengths: only extension keeps them
        with lock:
            threads.update(t.name for t in threading.enumerate() if t.name.startswith("fairq-heartbeat"))

    counts = fairq.Worker(q, handler, concurrency=4).run(until_idle=True)
    assert counts["acked"] == 4 and counts["lost"] == 0
    assert threads == {"fairq-heartbeat"}
    assert q.stats().totals["expired"] == 0
