"""AsyncWorker's graceful stop, on SQLite and PostgreSQL: every handler that returned
before the stop timeout ended has its event settled before run() returns, even when
its settle still waited for the database thread as the timeout fired; a handler
still running then is cancelled and abandoned: its event keeps its lease until the
lease runs out, as a killed worker's would. Nothing else is left inflight."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

import fairq
import fairq.aio

CONCURRENCY = 150
ROUNDS = 3
STOP_TIMEOUT = 0.3  # seconds the running handlers get once the worker stops
EARLY = 0.02  # the handlers are let go this long before the stop timeout ends
HANG = 60  # seconds; only to stop a hung test


async def one_stop(q: fairq.aio.AsyncQueue, tag: str) -> tuple[set[str], set[str], dict[str, int]]:
    """Fill every round with a handler, stop the worker, and let most handlers return just
    before the stop timeout ends (the rest keep running until cancelled). Returns the ids
    whose handler started, those whose handler returned, and the worker's counts."""
    await q.enqueue_many([(f"{tag}-{i}", {}, f"{tag}-flow-{i}") for i in range(CONCURRENCY)])
    started: set[str] = set()
    returned: set[str] = set()
    let_go = asyncio.Event()
    rng = random.Random(tag)

    async def handle(job: fairq.Job) -> None:
        started.add(job.event_id)
        await let_go.wait()
        if rng.random() < 0.2:
            await asyncio.sleep(HANG)  # still running at the stop timeout: cancelled
        await asyncio.sleep(rng.uniform(0, 2 * EARLY))  # some return after the timeout fired
        returned.add(job.event_id)

    worker = fairq.aio.AsyncWorker(q, handle, concurrency=CONCURRENCY, stop_timeout=STOP_TIMEOUT,
                                   idle_min=0.01, idle_max=0.05)
    running = asyncio.ensure_future(worker.run(signals=False))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG
    while len(started) < CONCURRENCY:
        assert loop.time() < deadline and not running.done(), len(started)
        await asyncio.sleep(0.01)
    worker.stop()
    loop.call_later(STOP_TIMEOUT - EARLY, let_go.set)
    counts = await asyncio.wait_for(running, HANG)
    return started, returned, counts


def left_inflight(queue: fairq.Queue, ids: set[str]) -> list[str]:
    """The ids among `ids` whose event is still inflight."""
    return sorted(i for i in ids if queue.get(i).state is fairq.State.INFLIGHT)


def test_every_handler_that_returned_is_settled_before_a_stopped_async_worker_returns(either_store: Any) -> None:
    async def main() -> list[tuple[int, ...]]:
        rows = []
        async with fairq.aio.AsyncQueue(either_store, lease_seconds=60) as q:
            for r in range(ROUNDS):
                started, returned, counts = await one_stop(q, f"r{r}")
                stranded = await q.run(left_inflight, returned)
                cut = await q.run(left_inflight, started - returned)
                acked = await q.run(lambda queue: sum(queue.get(i).state is fairq.State.ACKED for i in returned))
                rows.append((len(started), len(returned), acked, len(stranded), len(cut), counts["abandoned"]))
        return rows

    rows = asyncio.run(main())
    print("\n(started, returned, acked of them, returned but inflight, cut short and inflight, abandoned) "
          "per stop:", rows)
    for started, returned, acked, stranded, cut, abandoned in rows:
        assert stranded == 0, f"{stranded} events whose handler returned were left inflight"
        assert acked == returned, f"{returned - acked} events whose handler returned were not acked"
        assert cut == abandoned == started - returned  # the others were cancelled, their leases kept
