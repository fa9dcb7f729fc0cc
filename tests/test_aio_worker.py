"""fairq.aio.AsyncWorker: an async handler's work runs exactly as a sync one's does with
fairq.Worker (outcomes, heartbeats, lost leases, timeouts, stop), plus what only tasks can do
(a lost lease or a timeout cancels the handler task)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import fairq
import fairq.aio


def outcome_of(kind: str) -> Any:
    """What a handler does for an event whose body names `kind`."""
    if kind == "retry":
        raise fairq.Retry("later", delay=30)
    if kind == "fail":
        raise fairq.Fail("bad input")
    if kind == "error":
        raise ValueError("boom")
    return None


def sync_handler(job: fairq.Job) -> None:
    outcome_of(job.body["kind"])


async def async_handler(job: fairq.Job) -> None:
    await asyncio.sleep(0)
    outcome_of(job.body["kind"])


KINDS = ["ack", "retry", "fail", "error"]


def summary(handled: list[fairq.Handled]) -> list[tuple[Any, ...]]:
    return [(h.event_id, h.outcome, h.reason, h.settled.state if h.settled else None) for h in handled]


def test_an_async_handler_has_the_same_outcomes_as_a_sync_one(tmp_path: Path) -> None:
    results = {}
    for name in ("sync", "async"):
        q = fairq.Queue(tmp_path / f"{name}.db", max_attempts=3)
        q.enqueue_many([(kind, {"kind": kind}) for kind in KINDS])
        if name == "sync":
            worker = fairq.Worker(q, sync_handler, batch=4)
            results[name] = summary(worker.step()), worker.counts(), q.stats().counts
            q.close()
        else:
            async def drain(aq: fairq.aio.AsyncQueue) -> Any:
                async with aq:
                    worker = fairq.aio.AsyncWorker(aq, async_handler, batch=4)
                    return summary(await worker.step()), worker.counts(), (await aq.stats()).counts
            results[name] = asyncio.run(drain(fairq.aio.AsyncQueue(q)))
    assert results["async"] == results["sync"]
    handled, counts, states = results["async"]
    assert [h[1:3] for h in handled] == [(fairq.ACK, None), (fairq.RETRY, "later"), (fairq.FAIL, "bad input"),
                                        (fairq.RETRY, "ValueError: boom")]
    assert counts["acked"] == 1 and counts["retried"] == 2 and counts["quarantined"] == 1


def test_a_plain_function_is_refused_with_a_pointer_to_worker(db_path: Path) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            with pytest.raises(fairq.InvalidInput) as refused:
                fairq.aio.AsyncWorker(q, sync_handler)
            assert refused.value.field == "handler" and "fairq.Worker" in str(refused.value)
            with pytest.raises(fairq.InvalidInput) as refused:
                fairq.aio.AsyncWorker(q.sync, async_handler)
            assert refused.value.field == "queue"

    asyncio.run(main())


def test_the_heartbeat_extends_the_lease_while_the_handler_awaits(db_path: Path) -> None:
    leases: list[fairq.Lease] = []

    async def slow(job: fairq.Job) -> None:
        first = job.lease
        await asyncio.sleep(1.0)  # more than three leases of 0.3 s
        leases.extend([first, job.lease])

    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue("a", {})
            worker = fairq.aio.AsyncWorker(q, slow, lease_seconds=0.3)
            handled = await worker.step()
            assert handled[0].settled is not None and handled[0].settled.state is fairq.State.ACKED
            assert worker.counts()["lost"] == 0

    asyncio.run(main())
    assert leases[1].lease_until > leases[0].lease_until + 0.5


def test_a_lost_lease_cancels_the_handler_and_nothing_of_it_is_settled(db_path: Path) -> None:
    seen: list[str] = []

    async def handler(job: fairq.Job) -> None:
        await q.release(job.lease)  # someone else settles it: the next heartbeat finds it gone
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(f"cancelled lost={job.lost}")
            raise

    async def main() -> None:
        async with q:
            await q.enqueue("a", {})
            worker = fairq.aio.AsyncWorker(q, handler, lease_seconds=0.3)
            handled = await asyncio.wait_for(worker.step(), 20)  # the timeout only stops a hang
            assert handled[0].settled is None and isinstance(handled[0].lost, fairq.StaleLease)
            assert worker.counts()["lost"] == 1
            info = await q.get("a")
            assert info is not None and info.state is fairq.State.READY

    q = fairq.aio.AsyncQueue(db_path)
    asyncio.run(main())
    assert seen == ["cancelled lost=True"]


def test_a_handler_past_its_timeout_is_cancelled_and_retried_with_reason_timeout(db_path: Path) -> None:
    seen: list[str] = []

    async def handler(job: fairq.Job) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue("a", {})
            worker = fairq.aio.AsyncWorker(q, handler, timeout=0.2)
            started = time.monotonic()
            handled = await worker.step()
            assert time.monotonic() - started < 10
            assert (handled[0].outcome, handled[0].reason) == (fairq.RETRY, "timeout")
            assert handled[0].settled is not None and handled[0].settled.state is fairq.State.READY
            assert worker.counts()["retried"] == 1

    asyncio.run(main())
    assert seen == ["cancelled"]


def test_sigterm_stops_claiming_and_the_running_handler_finishes_and_is_settled(db_path: Path) -> None:
    async def handler(job: fairq.Job) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.2)
        assert job.stopping

    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue_many([(f"e{i}", {}) for i in range(5)])
            counts = await fairq.aio.AsyncWorker(q, handler, idle_max=0.05).run()
            assert counts["claimed"] == counts["acked"] == 1
            assert (await q.stats()).counts["ready"] == 4

    asyncio.run(main())


def test_a_handler_still_running_after_the_stop_timeout_is_cancelled_and_abandoned_to_expire(
        db_path: Path) -> None:
    cancelled = []

    async def handler(job: fairq.Job) -> None:
        worker.stop()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(job.event_id)
            raise

    async def main() -> None:
        global worker
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue("a", {})
            worker = fairq.aio.AsyncWorker(q, handler, stop_timeout=0.2, lease_seconds=0.5)
            counts = await asyncio.wait_for(worker.run(signals=False), 20)  # the timeout only stops a hang
            assert cancelled == ["a"]
            assert counts["abandoned"] == 1 and counts["retried"] == 0
            info = await q.get("a")
            # Not settled as a handler failure: its lease runs out, as a killed worker's would.
            assert info is not None and info.state is fairq.State.INFLIGHT and info.reason is None
            await asyncio.sleep(max(0.0, info.lease_until - time.time()) + 0.05)
            again = await q.claim()
            assert again is not None and again.event_id == "a" and again.attempts == 2
            assert [(a.action, a.reason) for a in await q.audit("a")] == [
                ("expired", "lease expired before the holder settled")]

    asyncio.run(main())


def test_until_idle_drains_with_many_concurrent_handlers(db_path: Path) -> None:
    running, most = 0, 0

    async def handler(job: fairq.Job) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1

    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue_many([(f"e{i}", {}, f"f{i % 20}") for i in range(100)])
            counts = await fairq.aio.AsyncWorker(q, handler, concurrency=16, batch=2).run(until_idle=True)
            assert counts["acked"] == 100 and counts["lost"] == 0
            assert (await q.stats()).counts["acked"] == 100

    asyncio.run(main())
    assert 1 < most <= 16


def test_until_empty_waits_through_a_retry_backoff(db_path: Path) -> None:
    tries: list[int] = []

    async def handler(job: fairq.Job) -> None:
        tries.append(job.attempts)
        if job.attempts == 1:
            raise fairq.Retry("once more", delay=0.2)

    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue("a", {})
            counts = await fairq.aio.AsyncWorker(q, handler, idle_max=0.05).run(until_empty=True)
            assert counts["retried"] == 1 and counts["acked"] == 1

    asyncio.run(main())
    assert tries == [1, 2]


def test_a_handler_that_blocks_the_loop_longer_than_the_lease_is_logged(db_path: Path, caplog) -> None:
    async def blocking(job: fairq.Job) -> None:
        time.sleep(0.8)  # the mistake: blocks the loop for more than the 0.2 s lease

    async def main() -> None:
        # One attempt: the expired lease quarantines the event instead of handling it again.
        async with fairq.aio.AsyncQueue(db_path, max_attempts=1) as q:
            await q.enqueue("a", {})
            worker = fairq.aio.AsyncWorker(q, blocking, lease_seconds=0.2)
            await worker.run(until_idle=True, signals=False)
            assert worker.watch is not None and worker.watch.stalls >= 1

    with caplog.at_level(logging.ERROR, logger="fairq.worker"):
        asyncio.run(main())
    assert any("loop.blocked" in r.getMessage() for r in caplog.records)


def test_the_sync_worker_refuses_an_async_handler_and_points_to_async_worker(q: fairq.Queue) -> None:
    with pytest.raises(fairq.InvalidInput) as refused:
        fairq.Worker(q, async_handler)
    assert "fairq.aio.AsyncWorker" in str(refused.value)


SECOND_SIGNAL = """
import asyncio, sys, fairq, fairq.aio

async def hang(job):
    print("started", flush=True)
    await asyncio.sleep(600)

async def main():
    async with fairq.aio.AsyncQueue(sys.argv[1]) as q:
        await q.enqueue("a", {})
        await fairq.aio.AsyncWorker(q, hang, stop_timeout=600).run()

asyncio.run(main())
"""


def test_a_second_sigterm_exits_a_real_process_at_once_and_the_lease_is_left_to_expire(db_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", SECOND_SIGNAL, str(db_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(fairq.__file__).parent.parent)})
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert proc.poll() is None  # the first one waits for the handler (stop_timeout 600 s)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)  # the timeout only stops a hang
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "second SIGTERM" in err
    with fairq.Queue(db_path) as q:
        info = q.get("a")
        assert info is not None and info.state is fairq.State.INFLIGHT


def test_a_finished_job_keeps_its_lease_while_a_later_job_of_its_batch_runs(db_path: Path) -> None:
    async def handler(job: fairq.Job) -> None:
        if job.event_id == "late":
            await asyncio.sleep(1.0)  # more than three leases of 0.3 s: "early" waits to be settled

    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue_many([("early", {}, "a"), ("late", {}, "b")])
            worker = fairq.aio.AsyncWorker(q, handler, batch=2, lease_seconds=0.3)
            handled = await worker.step()
            assert [(h.event_id, h.settled is not None) for h in handled] == [("early", True), ("late", True)]
            assert worker.counts()["acked"] == 2 and worker.counts()["lost"] == 0

    asyncio.run(main())


def test_cancelling_a_running_worker_strands_nothing(db_path: Path) -> None:

    async def main() -> None:
        began = asyncio.Event()

        async def hang(job: fairq.Job) -> None:
            began.set()
            await asyncio.sleep(600)

        async with fairq.aio.AsyncQueue(db_path) as q:
            await q.enqueue_many([("a", {}, "f1"), ("b", {}, "f2"), ("c", {}, "f3")])
            worker = fairq.aio.AsyncWorker(q, hang, batch=3)
            running = asyncio.ensure_future(worker.run(signals=False))
            await asyncio.wait_for(began.wait(), 20)  # the timeout only stops a hang
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            assert worker.counts()["abandoned"] == 1 and worker.counts()["released"] == 2
            infos = {e: await q.get(e) for e in "abc"}
            # The cancelled handler's event keeps its lease until it runs out; the rest are given back.
            assert [infos[e].state for e in "abc"] == [  # type: ignore[union-attr]
                fairq.State.INFLIGHT, fairq.State.READY, fairq.State.READY]
            assert [infos[e].attempts for e in "abc"] == [1, 0, 0]  # type: ignore[union-attr]

    asyncio.run(main())
