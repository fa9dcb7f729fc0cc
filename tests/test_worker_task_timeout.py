"""A job whose event stores its own handler timeout (Lease.timeout) runs
under that timeout on Worker and AsyncWorker, instead of the worker's; a
job without one runs under the worker's."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import fairq
import fairq.aio

HANG = 20.0  # only ends a hang: every wait below is released long before


def test_a_worker_gives_up_a_handler_past_its_events_own_timeout(tmp_path: Path) -> None:
    kinds: list[str | None] = []
    with fairq.Queue(tmp_path / "q.db", lease_seconds=30, backoff=fairq.Backoff(base=0.01, jitter=False)) as q:
        q.enqueue("short", {}, kind="quick", timeout=0.2)

        def handler(job: fairq.Job) -> None:
            kinds.append(job.kind)
            deadline = time.monotonic() + HANG
            while not job.lost and time.monotonic() < deadline:  # a handler that gives up once timed out
                time.sleep(0.01)

        worker = fairq.Worker(q, handler)  # no timeout of its own
        started = time.monotonic()
        [handled] = worker.step()
        assert time.monotonic() - started < HANG / 2
        assert (handled.outcome, handled.reason) == (fairq.RETRY, "timeout")
        assert kinds == ["quick"]
        assert [a.reason for a in q.audit("short") if a.action == "retry"] == ["timeout"]


def test_a_worker_lets_a_job_without_its_own_timeout_run_under_the_workers(tmp_path: Path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue("long", {}, timeout=5)
        q.enqueue("plain", {})
        seen: list[tuple[str, float | None]] = []

        def handler(job: fairq.Job) -> None:
            seen.append((job.event_id, job.lease.timeout))
            time.sleep(0.3)  # past the worker's 0.1 s only for the job without its own timeout

        worker = fairq.Worker(q, handler, timeout=0.1)
        handled = {h.event_id: h for h in [*worker.step(), *worker.step()]}
        assert sorted(seen) == [("long", 5.0), ("plain", None)]
        assert handled["long"].outcome is fairq.ACK
        assert (handled["plain"].outcome, handled["plain"].reason) == (fairq.RETRY, "timeout")


def test_an_async_worker_cancels_a_handler_past_its_events_own_timeout(tmp_path: Path) -> None:
    cancelled: list[str] = []

    async def handler(job: fairq.Job) -> None:
        try:
            await asyncio.sleep(HANG)
        except asyncio.CancelledError:
            cancelled.append(f"{job.event_id}:{job.kind}")
            raise

    async def main() -> None:
        async with fairq.aio.AsyncQueue(tmp_path / "q.db") as q:
            await q.enqueue("a", {}, kind="slow", timeout=0.2)
            worker = fairq.aio.AsyncWorker(q, handler)  # no timeout of its own
            started = time.monotonic()
            [handled] = await worker.step()
            assert time.monotonic() - started < HANG / 2
            assert (handled.outcome, handled.reason) == (fairq.RETRY, "timeout")

    asyncio.run(main())
    assert cancelled == ["a:slow"]
