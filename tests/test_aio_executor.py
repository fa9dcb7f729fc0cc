"""An idle AsyncWorker waits on threads of fairq's own, never the loop's default executor:
beside 16 or 32 idle rounds, on SQLite and on PostgreSQL (where they wait for a
notification), the application's `asyncio.to_thread` stays quick, in a handler too; and
once the worker has stopped and its queue closed, no thread of fairq's is left."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from typing import Any

import pytest

import fairq
import fairq.aio

SETTLE = 1.5  # seconds for the idle rounds' pauses to grow to idle_max before measuring
SAMPLES = 20
QUICK = 0.1  # seconds: the median to_thread may take (a no-op; it took seconds with fairq in the pool)
HANG = 60  # seconds; only to stop a hung test


def noop() -> None:
    pass


async def to_thread_seconds(samples: int) -> list[float]:
    """How long `await asyncio.to_thread(noop)` takes, `samples` times, 20 ms apart."""
    loop = asyncio.get_running_loop()
    took = []
    for _ in range(samples):
        began = loop.time()
        await asyncio.to_thread(noop)
        took.append(loop.time() - began)
        await asyncio.sleep(0.02)
    return took


def fairq_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("fairq")}


@pytest.mark.parametrize("concurrency", [16, 32])
def test_an_idle_async_worker_leaves_the_default_executor_to_the_application(
        either_store: Any, concurrency: int) -> None:
    before = fairq_threads()
    in_handler: list[float] = []

    async def handle(job: fairq.Job) -> None:
        in_handler.extend(await to_thread_seconds(SAMPLES // 2))

    async def main() -> list[float]:
        async with fairq.aio.AsyncQueue(either_store) as q:
            worker = fairq.aio.AsyncWorker(q, handle, concurrency=concurrency, idle_max=1.0)
            running = asyncio.ensure_future(worker.run(signals=False))
            await asyncio.sleep(SETTLE)
            beside = await to_thread_seconds(SAMPLES)
            await q.enqueue("measure", {})
            deadline = time.monotonic() + HANG
            while worker.counts()["acked"] < 1:
                assert time.monotonic() < deadline and not running.done()
                await asyncio.sleep(0.02)
            worker.stop()
            await asyncio.wait_for(running, HANG)
        return beside

    beside = asyncio.run(main())
    print(f"\nto_thread beside {concurrency} idle rounds: median {statistics.median(beside) * 1000:.1f} ms, "
          f"max {max(beside) * 1000:.1f} ms; in a handler: median {statistics.median(in_handler) * 1000:.1f} ms, "
          f"max {max(in_handler) * 1000:.1f} ms")
    assert statistics.median(beside) < QUICK
    assert statistics.median(in_handler) < QUICK
    deadline = time.monotonic() + HANG / 4
    while left := fairq_threads() - before:  # the threads end soon after close, not at once
        assert time.monotonic() < deadline, sorted(t.name for t in left)
        time.sleep(0.02)
