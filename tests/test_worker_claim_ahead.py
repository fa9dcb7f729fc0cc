"""Claim ahead and settle together: with batch 1 and concurrency > 1, the threads (or
tasks) of one worker about to claim share one claim_many, each taking the next lease in
claim order, and the settles of those finishing at once share one settle_many; a job
that finished is settled while another thread's job still runs. Real threads on a real
file: the handlers meet at a barrier, so the threads come back together, and fewer
claims and settles than jobs are sent; every event is handled once and acked; leases
claimed ahead that no thread took are released at the end of the run."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import fairq
import fairq.aio
from fairq.worker.ahead import ClaimAhead
from fairq.worker.together import SettleTogether

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


def test_threads_about_to_claim_share_one_claim_and_those_finishing_together_one_settle(tmp_path: Path) -> None:
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
        assert sum(q.settles) == EVENTS and len(q.settles) < EVENTS, q.settles


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


def test_a_finished_job_is_settled_while_another_thread_still_runs_its_own(tmp_path: Path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue_many([("slow", {}, "A"), ("fast", {}, "B")])
        gate = threading.Event()

        def handler(job: fairq.Job) -> None:
            if job.event_id == "slow":
                gate.wait(MEET * 4)

        worker = fairq.Worker(q, handler, concurrency=2)
        run = threading.Thread(target=lambda: worker.run(until_empty=True, signals=False))
        run.start()
        try:
            for _ in range(int(MEET * 100)):
                if q.get("fast").state is fairq.State.ACKED:
                    break
                threading.Event().wait(0.01)
            assert q.get("fast").state is fairq.State.ACKED  # settled as it finished
            assert q.get("slow").state is fairq.State.INFLIGHT
        finally:
            gate.set()
            run.join(MEET * 4)
        assert q.get("slow").state is fairq.State.ACKED


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


def test_settles_waiting_for_one_being_written_are_written_together_and_each_gets_its_own_results() -> None:
    calls: list[list[str]] = []
    first_in = threading.Event()
    let_go = threading.Event()

    def settle_many(items: list[str]) -> list[str]:
        calls.append(list(items))
        if len(calls) == 1:
            first_in.set()
            let_go.wait(MEET)
        if "boom" in items:
            raise fairq.Unavailable("x", "the database is out of reach")
        return [f"done {item}" for item in items]

    together: SettleTogether[str] = SettleTogether(settle_many)

    def round_of(second: list[str], third: list[str]) -> dict[str, object]:
        """"first" settles alone and is held; "second" and "third" wait for it, then go."""
        calls.clear()
        first_in.clear()
        let_go.clear()
        got: dict[str, object] = {}

        def settle(name: str, items: list[str]) -> None:
            try:
                got[name] = together.settle(items)
            except fairq.Unavailable as exc:
                got[name] = exc

        first = threading.Thread(target=settle, args=("first", ["a"]))
        first.start()
        assert first_in.wait(MEET)  # written alone, at once: nobody else was settling
        others = [threading.Thread(target=settle, args=(name, items))
                  for name, items in (("second", second), ("third", third))]
        for t in others:
            t.start()
        for _ in range(int(MEET * 100)):  # both wait for the first write
            if len(together._waiting) == 2:
                break
            threading.Event().wait(0.01)
        let_go.set()
        for t in [first, *others]:
            t.join(MEET)
        return got

    got = round_of(["b", "c"], ["d"])
    assert calls[0] == ["a"] and sorted(calls[1]) == ["b", "c", "d"] and len(calls) == 2
    assert got == {"first": ["done a"], "second": ["done b", "done c"], "third": ["done d"]}
    # An error of the call is every waiting thread's: none of its items was written.
    got = round_of(["boom"], ["d"])
    assert got["first"] == ["done a"]
    assert isinstance(got["second"], fairq.Unavailable) and got["second"] is got["third"]
