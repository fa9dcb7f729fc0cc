"""An idle worker's wait (Queue.wait_for_work), listen=False, and a server out of reach."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import fairq

HANG = 60  # seconds; only to stop a hung test


def test_waiting_for_work_on_sqlite_is_a_plain_sleep_that_asks_to_poll(q: fairq.Queue) -> None:
    assert q.wait_for_work(0.01) is False
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    assert q.wait_for_work(HANG, stop) is False  # a stop set ends the wait at once
    assert time.monotonic() - started < HANG / 2


@pytest.mark.parametrize("bad", [-1, "1", None, True, float("nan")])
def test_a_bad_wait_is_refused_naming_timeout(q: fairq.Queue, bad: Any) -> None:
    with pytest.raises(fairq.InvalidInput, match="timeout"):
        q.wait_for_work(bad)


class Counting:
    """A Queue whose wait_for_work calls are counted."""

    def __init__(self, queue: fairq.Queue) -> None:
        self.queue = queue
        self.waits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    def wait_for_work(self, timeout: float, stop: threading.Event | None = None) -> bool:
        self.waits += 1
        return self.queue.wait_for_work(timeout, stop)


def test_an_idle_worker_waits_through_the_queue_unless_listen_is_off(q: fairq.Queue) -> None:
    listening, polling = Counting(q), Counting(q)
    for queue, listen in ((listening, True), (polling, False)):
        worker = fairq.Worker(queue, lambda job: None, idle_min=0.001, idle_max=0.002, listen=listen)
        timer = threading.Timer(0.1, worker.stop)
        timer.start()
        worker.run(signals=False)
        timer.join()
    assert listening.waits > 0
    assert polling.waits == 0


def test_listen_must_be_a_bool(q: fairq.Queue) -> None:
    with pytest.raises(fairq.InvalidInput, match="listen"):
        fairq.Worker(q, lambda job: None, listen="no")  # type: ignore[arg-type]


class Flaky:
    """A Queue whose first claims find the server out of reach."""

    def __init__(self, queue: fairq.Queue, failures: int) -> None:
        self.queue = queue
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    def claim_many(self, *args: Any, **kw: Any) -> list[fairq.Lease]:
        if self.failures:
            self.failures -= 1
            raise fairq.Unavailable("postgresql://db", "the connection to the server failed")
        return self.queue.claim_many(*args, **kw)


def test_a_running_worker_waits_out_a_server_out_of_reach_and_goes_on(
        q: fairq.Queue, caplog: pytest.LogCaptureFixture) -> None:
    q.enqueue_many([(f"e{i}", {}, f"F{i % 3}") for i in range(6)])
    flaky = Flaky(q, failures=3)
    done: list[str] = []
    worker = fairq.Worker(flaky, lambda job: done.append(job.event_id), idle_min=0.001, idle_max=0.01)
    counts = worker.run(until_idle=True, signals=False)
    assert flaky.failures == 0
    assert sorted(done) == [f"e{i}" for i in range(6)]
    assert counts["acked"] == 6
    assert sum("queue.unavailable" in r.getMessage() for r in caplog.records) == 3


def test_other_queue_errors_still_end_the_run(q: fairq.Queue) -> None:
    class Broken(Flaky):
        def claim_many(self, *args: Any, **kw: Any) -> list[fairq.Lease]:
            raise fairq.StoreError("db", "disk I/O error")

    with pytest.raises(fairq.StoreError):
        fairq.Worker(Broken(q, 0), lambda job: None).run(until_idle=True, signals=False)


def test_a_worker_reconnects_its_queue_after_unavailable(q: fairq.Queue) -> None:
    class Reconnecting(Flaky):
        reconnects = 0

        def reconnect(self) -> None:
            self.reconnects += 1
            self.queue.reconnect()

    q.enqueue("a", {})
    flaky = Reconnecting(q, failures=2)
    counts = fairq.Worker(flaky, lambda job: None, idle_min=0.001, idle_max=0.01).run(until_idle=True, signals=False)
    assert flaky.reconnects == 2 and counts["acked"] == 1


def test_a_reconnected_queue_goes_on_with_the_same_file(q: fairq.Queue) -> None:
    q.enqueue("a", {})
    q.reconnect()
    lease = q.claim()
    assert lease is not None and q.ack(lease).state is fairq.State.ACKED


def test_an_async_worker_waits_out_a_server_out_of_reach_reconnects_and_goes_on(
        q: fairq.Queue, caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    import fairq.aio

    class FlakyAsync(fairq.aio.AsyncQueue):
        failures = 3

        async def claim_many(self, *args: Any, **kw: Any) -> list[fairq.Lease]:
            if self.failures:
                self.failures -= 1
                raise fairq.Unavailable("postgresql://db", "the connection to the server failed")
            return await super().claim_many(*args, **kw)

    reconnects: list[int] = []
    q.reconnect = lambda: reconnects.append(1)  # type: ignore[method-assign]
    q.enqueue_many([(f"e{i}", {}, f"F{i % 3}") for i in range(6)])
    done: list[str] = []

    async def handle(job: fairq.Job) -> None:
        done.append(job.event_id)

    async def drain() -> dict[str, int]:
        async with FlakyAsync(q) as flaky:
            worker = fairq.aio.AsyncWorker(flaky, handle, idle_min=0.001, idle_max=0.01)
            return await worker.run(until_idle=True, signals=False)

    counts = asyncio.run(drain())
    assert sorted(done) == [f"e{i}" for i in range(6)] and counts["acked"] == 6
    assert len(reconnects) == 3
    assert sum("queue.unavailable" in r.getMessage() for r in caplog.records) == 3
