"""fairq.aio.AsyncQueue: every verb as a coroutine on one thread per queue, and cancellation
that never strands work (a claim cancelled after it committed gives its leases back)."""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import time
from pathlib import Path

import pytest

import fairq
import fairq.aio

REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_the_queue_verbs_are_coroutines_with_the_sync_results(db_path: Path) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path, lease_seconds=5) as q:
            assert (await q.enqueue("a", {"n": 1}, flow="f")).created
            assert [e.created for e in await q.enqueue_many([("b", {"n": 2}, "f"), ("c", {}, "g")])] == [True] * 2
            lease = await q.claim(owner="me")
            assert lease is not None and lease.event_id == "a" and lease.owner == "me"
            longer = await q.extend(lease, 60)
            assert longer.lease_until > lease.lease_until
            assert (await q.ack(longer)).state is fairq.State.ACKED
            leases = await q.claim_many(5)
            assert sorted(l.event_id for l in leases) == ["b", "c"]
            settled = await q.settle_many([(leases[0], "release"), (leases[1], "fail", "bad")])
            assert [s.state for s in settled] == [fairq.State.READY, fairq.State.QUARANTINED]
            assert (await q.stats()).counts == {"ready": 1, "inflight": 0, "acked": 1, "quarantined": 1, "discarded": 0}
            info = await q.get("a")
            assert info is not None and info.state is fairq.State.ACKED
            assert [e.event_id for e in await q.events(state="quarantined")] == [leases[1].event_id]
            assert (await q.policy()).lease_seconds == 5
            assert q.claim.__doc__ == fairq.Queue.claim.__doc__ and q.claim.__name__ == "claim"
        with pytest.raises(Exception):
            q.sync.stats()  # the Queue was closed with the AsyncQueue

    asyncio.run(main())


def test_a_refused_call_raises_the_same_typed_error(db_path: Path) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            with pytest.raises(fairq.InvalidInput) as refused:
                await q.enqueue("", {})
            assert refused.value.field == "event_id"
            assert (await q.stats()).counts["ready"] == 0  # nothing was written
            with pytest.raises(fairq.InvalidInput) as refused:
                fairq.aio.AsyncQueue(q.sync, lease_seconds=5)
            assert refused.value.field == "options"

    asyncio.run(main())


def test_calls_run_on_one_dedicated_thread_with_the_callers_contextvars(db_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def record(queue: fairq.Queue) -> None:
        seen.append((threading.current_thread().name, REQUEST.get()))

    async def request(name: str, q: fairq.aio.AsyncQueue) -> None:
        REQUEST.set(name)
        await q.run(record)
        await q.enqueue(name, {})

    async def main() -> None:
        default = await asyncio.get_running_loop().run_in_executor(None, lambda: threading.current_thread().name)
        async with fairq.aio.AsyncQueue(db_path) as q:
            await asyncio.gather(*(request(f"r{i}", q) for i in range(8)))
            assert (await q.stats()).counts["ready"] == 8
        threads = {name for name, _ in seen}
        assert len(threads) == 1 and threads != {default} and threading.current_thread().name not in threads
        assert sorted(value for _, value in seen) == sorted(f"r{i}" for i in range(8))

    asyncio.run(main())


def test_a_call_cancelled_while_it_waits_for_the_thread_never_runs(db_path: Path) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            busy = asyncio.ensure_future(q.run(lambda queue: time.sleep(0.3)))
            waiting = asyncio.ensure_future(q.enqueue("late", {}))
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await busy
            assert await q.get("late") is None

    asyncio.run(main())


def test_an_enqueue_cancelled_while_it_runs_still_completes(db_path: Path) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            started = threading.Event()

            def slow_effect(queue: fairq.Queue) -> fairq.Enqueued:
                started.set()
                time.sleep(0.2)
                return queue.enqueue("kept", {})

            call = asyncio.ensure_future(q.run(slow_effect))
            while not started.is_set():
                await asyncio.sleep(0.005)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            info = await q.get("kept")
            assert info is not None and info.state is fairq.State.READY

    asyncio.run(main())


class CountingQueue(fairq.Queue):
    """Counts the leases its claims committed (on the database thread)."""

    committed = 0

    def claim_many(self, n: int, **kw: object) -> list[fairq.Lease]:  # type: ignore[override]
        leases = super().claim_many(n, **kw)  # type: ignore[arg-type]
        CountingQueue.committed += len(leases)
        return leases


def test_claims_cancelled_at_200_random_points_strand_no_event(db_path: Path) -> None:
    """Every claim is cancelled after a random wait (before it reaches the thread, while it runs,
    or after it returned); every lease a claim committed is either returned to the caller (who
    releases it) or given back by the cancelled call. Nothing is left inflight, no attempt is spent."""
    rng = random.Random(20261130)
    CountingQueue.committed = 0

    async def main() -> None:
        async with fairq.aio.AsyncQueue(CountingQueue(db_path, lease_seconds=600)) as q:
            await q.enqueue_many([(f"e{i}", {}, f"f{i % 7}") for i in range(40)])
            returned = cancelled = 0
            for point in range(200):
                call = asyncio.ensure_future(q.claim(owner="c") if point % 2 else q.claim_many(3, owner="c"))
                wait = rng.choice([0.0, rng.uniform(0, 0.004)])
                if wait:
                    await asyncio.sleep(wait)
                call.cancel()
                try:
                    result = await call
                except asyncio.CancelledError:
                    cancelled += 1
                    continue
                leases = result if isinstance(result, list) else [result] if result else []
                returned += len(leases)
                if leases:
                    await q.settle_many([(lease, "release") for lease in leases])
            stats = await q.stats()
            assert stats.counts["inflight"] == 0, stats
            assert cancelled > 0
            given_back = CountingQueue.committed - returned
            assert given_back > 0  # some cancels landed after a claim had committed
            assert all(lease.attempts == 1 for lease in await q.claim_many(40))  # no attempt spent
            return None

    asyncio.run(main())


def test_the_queue_schedules_are_coroutines_run_on_the_queues_thread(db_path: Path) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncQueue(db_path) as q:
            added = await q.schedules.add("every-minute", every=60, start=1000.0, body={"k": 1})
            assert (await q.schedules.get("every-minute")) == added
            assert (await q.schedules.pause("every-minute")).paused
            assert not (await q.schedules.resume("every-minute")).paused
            assert [s.name for s in await q.schedules.list()] == ["every-minute"]
            assert await q.schedules.misfires("every-minute") == []
            assert [e.created for e in await q.tick(now=1000.0)] == [True]
            threads = await q.run(lambda queue: threading.current_thread().name)
            assert threads.startswith("fairq-db-") and threading.current_thread().name != threads
            await q.schedules.remove("every-minute")
            with pytest.raises(fairq.UnknownSchedule):
                await q.schedules.remove("every-minute")
            assert q.schedules.add.__doc__ == q.sync.schedules.add.__doc__

    asyncio.run(main())
