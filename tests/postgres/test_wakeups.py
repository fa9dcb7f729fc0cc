"""Wake-ups on PostgreSQL: an idle worker sleeps until a NOTIFY says work is claimable."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import fairq
from helpers import ROOT, SUPPORT, start
from pgops import pg_db  # noqa: F401  (the fixture)

HANG = 60  # seconds; only to stop a hung test
#: A worker's idle_max in these tests: a pick-up well under it came from a notification.
IDLE_MAX = 30.0


def picked_up_after(queue: fairq.Queue, marks: Path, event_id: str, delay: float = 0) -> float:
    """Enqueue `event_id` (due after `delay`) and return the seconds until a handler started on it."""
    sent = time.time()
    queue.enqueue(event_id, {}, delay=delay)
    deadline = time.monotonic() + HANG
    mark = marks / event_id
    while not mark.exists() or not mark.read_text():
        assert time.monotonic() < deadline, f"{event_id} was never picked up"
        time.sleep(0.002)
    return float(mark.read_text()) - sent


def listeners(url: str) -> int:
    """Connections to the database at `url` whose last statement was a LISTEN, or the
    mark of a process that may sleep (fairq.stores.postgres.listen)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND (query LIKE 'LISTEN%' OR query LIKE 'SELECT pg_advisory_%(26228, %')").fetchone()
    return int(row[0]) if row else 0


def stop(worker) -> None:
    worker.terminate()
    worker.communicate(timeout=HANG)


@contextmanager
def idle_worker(url: str, marks: Path) -> Iterator[None]:
    """A worker process on the queue at `url` (which this makes first), its
    handler marking in `marks` when it starts on each event; stopped on exit."""
    with fairq.Queue(url) as q:
        q.enqueue("first", {})
        q.claim()  # the queue exists before the worker opens it
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FAIRQ_TEST_MARKS": str(marks)}
    worker = subprocess.Popen([sys.executable, "pg_handlers.py", url, str(IDLE_MAX)], cwd=SUPPORT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield
    finally:
        stop(worker)


def test_an_idle_worker_picks_up_an_enqueue_from_another_process_at_once(
        pg_db: str, tmp_path: Path) -> None:  # noqa: F811
    with idle_worker(pg_db, tmp_path), fairq.Queue(pg_db) as q:
        picked_up_after(q, tmp_path, "warm-up")
        latencies = []
        for i in range(5):
            time.sleep(0.3)  # the worker is idle again, in a wait of up to IDLE_MAX
            latencies.append(picked_up_after(q, tmp_path, f"e{i}"))
        listening = listeners(pg_db)
    assert listening == 1
    assert max(latencies) < IDLE_MAX / 30, latencies  # polling would have slept up to IDLE_MAX
    print(f"wake-up latency: median {sorted(latencies)[2] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")


def test_an_idle_worker_wakes_when_a_delayed_enqueue_from_another_process_becomes_due(
        pg_db: str, tmp_path: Path) -> None:  # noqa: F811
    with idle_worker(pg_db, tmp_path), fairq.Queue(pg_db) as q:
        picked_up_after(q, tmp_path, "warm-up")
        latencies = []
        for i in range(4):
            time.sleep(0.3)  # the worker is idle again, asleep for up to IDLE_MAX: nothing waits
            latencies.append(picked_up_after(q, tmp_path, f"later-{i}", delay=0.3))
    # Due 0.3 s after the enqueue; a worker that learnt of it only on waking would sleep IDLE_MAX.
    assert all(0.29 <= latency < 0.3 + 0.1 for latency in latencies), latencies
    print(f"delayed pick-up: {', '.join(f'{latency * 1000:.0f}' for latency in latencies)} ms")


def test_an_idle_worker_with_a_long_idle_max_still_wakes_on_new_work(pg_db: str) -> None:  # noqa: F811
    with fairq.Queue(pg_db) as q:
        seen: list[tuple[str, float]] = []
        worker = fairq.Worker(q, lambda job: seen.append((job.event_id, time.time())), idle_max=IDLE_MAX)
        runner = threading.Thread(target=worker.run, kwargs={"signals": False})
        runner.start()
        try:
            time.sleep(0.3)  # idle, in a wait of up to IDLE_MAX
            with fairq.Queue(pg_db) as other:
                sent = time.time()
                other.enqueue("late", {})
            deadline = time.monotonic() + HANG
            while not seen and time.monotonic() < deadline:
                time.sleep(0.002)
        finally:
            worker.stop()
            runner.join(HANG)
    assert [e for e, _ in seen] == ["late"]
    assert seen[0][1] - sent < IDLE_MAX / 10


def test_an_idle_worker_sleeps_until_the_earliest_waiting_event_is_due(pg_db: str) -> None:  # noqa: F811
    with fairq.Queue(pg_db) as q:
        seen: list[float] = []
        due = time.time() + 1.0
        q.enqueue("later", {}, delay=1.0)  # waiting: no notification will come for it
        worker = fairq.Worker(q, lambda job: seen.append(time.time()), idle_max=IDLE_MAX)
        runner = threading.Thread(target=worker.run, kwargs={"signals": False})
        runner.start()
        try:
            deadline = time.monotonic() + HANG
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            worker.stop()
            runner.join(HANG)
    assert seen and seen[0] >= due - 0.05
    assert seen[0] - due < IDLE_MAX / 10


def test_with_listening_off_a_worker_still_picks_up_work_by_polling(pg_db: str, tmp_path: Path) -> None:  # noqa: F811
    with fairq.Queue(pg_db) as q:
        q.enqueue("first", {})
        q.claim()
    worker = start(pg_db, "pg_handlers:mark_time", "--no-tick", "--no-listen", marks=tmp_path)
    try:
        with fairq.Queue(pg_db) as q:
            picked_up_after(q, tmp_path, "warm-up")
            time.sleep(0.3)
            picked_up_after(q, tmp_path, "polled")  # within HANG: by polling
            listening = listeners(pg_db)
    finally:
        stop(worker)
    assert listening == 0


@pytest.mark.parametrize("listen", [True, False])
def test_closing_the_queue_ends_its_listening_connection(pg_db: str, listen: bool) -> None:  # noqa: F811
    q = fairq.Queue(pg_db)
    if listen:
        q.wait_for_work(0.01)
    during = listeners(pg_db)
    q.close()
    deadline = time.monotonic() + HANG
    while listeners(pg_db) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert during == (1 if listen else 0)
    assert listeners(pg_db) == 0


def test_an_idle_async_worker_wakes_on_new_work(pg_db: str) -> None:  # noqa: F811
    import asyncio

    import fairq.aio

    async def scenario() -> float:
        seen: list[float] = []

        async def handle(job: fairq.Job) -> None:
            seen.append(time.time())

        async with fairq.aio.AsyncQueue(pg_db) as q:
            worker = fairq.aio.AsyncWorker(q, handle, idle_max=IDLE_MAX)
            running = asyncio.ensure_future(worker.run(signals=False))
            await asyncio.sleep(0.3)  # idle, in a wait of up to IDLE_MAX
            with fairq.Queue(pg_db) as other:
                sent = time.time()
                other.enqueue("async", {})
            for _ in range(int(HANG / 0.01)):
                if seen:
                    break
                await asyncio.sleep(0.01)
            worker.stop()
            await asyncio.wait_for(running, HANG)
        assert seen
        return seen[0] - sent

    assert asyncio.run(scenario()) < IDLE_MAX / 10
