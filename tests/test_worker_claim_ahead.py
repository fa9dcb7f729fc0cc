"""Claim ahead: with batch 1 and concurrency > 1, the threads (or tasks) of one worker
about to claim share one claim_many, each taking the next lease in claim order, and
each job is still settled on its own as it finishes. Real threads on a real file: the
handlers meet at a barrier, so the threads come back to claim together, and fewer
claims than jobs are sent; every event is handled once and acked; leases claimed
ahead that no thread took are released at the end of the run."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import fairq
import fairq.aio
from fairq.worker.ahead import ClaimAhead

THREADS = 4
EVENTS = 48
MEET = 5.0  # seconds a handler waits for the others at the barrier; only to stop a hang


class CountingQueue(fairq.Queue):
    """A Queue that records each claim_many's size and how many leases it returned."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.claims: list[tuple[int, int]] = []
        self.settles: list[int] = []

    def claim_many(self, n: int, **kw: Any) -> list[fairq.Lease]:
        leases = super().claim_many(n, **kw)
        self.claims.append((n, len(leases)))
        return leases

    def settle_many(self, items: Any, **kw: Any) -> Any:
        self.settles.append(len(items))
        return super().settle_many(items, **kw)


def fill(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {"i": i}, f"f{i}") for i in range(EVENTS)])


def test_threads_about_to_claim_share_one_claim_and_settle_each_job_alone(tmp_path: Path) -> None:
    with CountingQueue(tmp_path / "q.db") as q:
        fill(q)
        met = threading.Barrier(THREADS)
        seen: list[str] = []

        def handler(job: fairq.Job) -> None:
            seen.append(job.event_id)
            try:
                met.wait(MEET)  # the threads finish together, then claim together
            except threading.BrokenBarrierError:
                pass  # the last round may hold fewer jobs than threads

        counts = fairq.Worker(q, handler, concurrency=THREADS).run(until_empty=True, signals=False)
        assert sorted(seen) == sorted(f"e{i}" for i in range(EVENTS))  # each event handled once
        assert counts["claimed"] == counts["acked"] == EVENTS and counts["released"] == 0
        assert q.stats().counts["acked"] == EVENTS
        got = [n for n, found in q.claims if found]
        assert sum(found for _, found in q.claims) == EVENTS
        assert len(got) < EVENTS and max(got) > 1, q.claims  # one claim served several threads
        assert set(q.settles) == {1}  # each job settled alone, as it finished


def test_async_rounds_about_to_claim_share_one_claim(tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, int], list[tuple[int, int]], list[str]]:
        queue = CountingQueue(tmp_path / "q.db")
        fill(queue)
        seen: list[str] = []
        met = asyncio.Barrier(THREADS) if hasattr(asyncio, "Barrier") else None

        async def handler(job: fairq.Job) -> None:
            seen.append(job.event_id)
            if met is not None:
                try:
                    await asyncio.wait_for(met.wait(), MEET)
                except (asyncio.TimeoutError, asyncio.BrokenBarrierError):
                    pass
            else:
                await asyncio.sleep(0.02)  # Python 3.10: no Barrier; the rounds still overlap

        async with fairq.aio.AsyncQueue(queue) as q:
            counts = await fairq.aio.AsyncWorker(q, handler, concurrency=THREADS).run(until_empty=True,
                                                                                    signals=False)
            assert (await q.stats()).counts["acked"] == EVENTS
        return counts, queue.claims, seen

    counts, claims, seen = asyncio.run(main())
    assert sorted(seen) == sorted(f"e{i}" for i in range(EVENTS))
    assert counts["claimed"] == counts["acked"] == EVENTS
    got = [n for n, found in claims if found]
    assert len(got) < EVENTS and max(got) > 1, claims


def test_leases_claimed_ahead_that_no_thread_took_are_handed_back_in_claim_order() -> None:
    leases = [object(), object(), object()]
    asked: list[int] = []

    def claim(n: int) -> list[Any]:
        asked.append(n)
        return list(leases)

    ahead = ClaimAhead(claim, 8)  # type: ignore[arg-type]
    assert ahead.take() == [leases[0]] and asked == [1]  # one thread waiting: asks for one
    assert ahead.take() == [leases[1]] and asked == [1]  # the next takes the one kept for it
    assert ahead.left() == [leases[2]] and ahead.left() == []
