"""fairq.Worker over fairq.Client, against a fairq HTTP server: workers in spawned processes
drain a backlog with heartbeats, batches and a graceful stop.

Handlers are work_handlers.slow: each leaves a mark (event_id.pid) when it starts
and sleeps body["sleep"] seconds. Timeouts only stop hangs.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter

import pytest

import fairq
import work_handlers
from helpers import HANG, TOKEN, remote_worker, running, wait_for_marks

SPAWN = multiprocessing.get_context("spawn")
# Leases this short lapse unless the heartbeat extends them over HTTP: the
# long handlers below sleep longer than one lease. A beat every 0.5 s leaves
# a stalled process 1 s before a lease lapses.
LEASE = 1.5


@pytest.fixture
def served(tmp_path):
    """(URL, database path, marks folder) of the server `fairq serve` runs, on a thread of this
    process, on a fresh database (`fairq serve` as a real process: test_http_serve.py)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    with fairq.Queue(tmp_path / "q.db") as queue, running(queue) as server:
        yield server.url, tmp_path / "q.db", marks


def events_of(db) -> list[fairq.EventInfo]:
    with fairq.Queue(db) as q:
        return q.events(limit=1000)


@pytest.mark.parametrize("batch", [1, 5])
def test_two_remote_workers_drain_a_backlog_each_event_claimed_and_acked_once(served, batch) -> None:
    url, db, marks = served
    ids = [f"e{i}" for i in range(40)]
    long = {"e3", "e5"}  # outlive their first lease; heads, so the two workers likely run them side by side
    fairq.Client(url, token=TOKEN).enqueue_many(
        [(x, {"sleep": LEASE + 0.3 if x in long else 0.0}, f"flow-{i % 8}") for i, x in enumerate(ids)])
    results = SPAWN.Queue()
    options = {"batch": batch, "lease_seconds": LEASE}
    workers = [SPAWN.Process(target=remote_worker, args=(url, str(marks), options, True, results))
               for _ in range(2)]
    for w in workers:
        w.start()
    counts = [results.get(timeout=HANG) for _ in workers]
    for w in workers:
        w.join(timeout=HANG)
    assert [w.exitcode for w in workers] == [0, 0]
    total = Counter()
    for c in counts:
        total.update(c)
    assert (total["claimed"], total["acked"], total["lost"], total["abandoned"]) == (40, 40, 0, 0)
    events = events_of(db)
    assert sorted(e.event_id for e in events) == sorted(ids)
    assert {(e.state, e.generation, e.lifetime_attempts) for e in events} == {(fairq.State.ACKED, 1, 1)}
    handled = Counter(mark.stem for mark in marks.iterdir())  # a mark per handler run
    assert sorted(handled) == sorted(ids) and set(handled.values()) == {1}


def test_a_remote_worker_stopped_by_sigterm_settles_its_batch_over_http(served) -> None:
    url, db, marks = served
    # Each handler runs until the stop: the rest of the batch never starts, however slow the machine.
    fairq.Client(url, token=TOKEN).enqueue_many(
        [(f"e{i}", {"until_stopping": True}, f"flow-{i}") for i in range(3)])
    results = SPAWN.Queue()
    worker = SPAWN.Process(target=remote_worker,
                           args=(url, str(marks), {"batch": 3, "lease_seconds": LEASE}, False, results))
    worker.start()
    [started] = wait_for_marks(marks, 1)
    worker.terminate()  # SIGTERM while the first handler of the batch runs
    counts = results.get(timeout=HANG)
    worker.join(timeout=HANG)
    assert worker.exitcode == 0
    assert (counts["claimed"], counts["acked"], counts["released"], counts["retried"], counts["lost"]) == (
        3, 1, 2, 0, 0)
    events = {e.event_id: e for e in events_of(db)}
    assert events[started.stem].state is fairq.State.ACKED  # the running job finished and was settled
    rest = [e for e in events.values() if e.event_id != started.stem]
    # Released, not retried: claimable again at once, with the attempt unspent.
    assert {(e.state, e.reason, e.attempts, e.lifetime_attempts) for e in rest} == {
        (fairq.State.READY, None, 0, 1)}
    assert all(e.next_at <= time.time() for e in rest)
    assert len(list(marks.iterdir())) == 1  # nothing else was started after the signal


def test_worker_processes_over_a_client_reopen_it_in_each_process(served, monkeypatch) -> None:
    url, db, marks = served
    monkeypatch.setenv("FAIRQ_TEST_MARKS", str(marks))
    client = fairq.Client(url, token=TOKEN, lease_seconds=LEASE)
    client.enqueue_many([(f"e{i}", {"sleep": 0.05}, f"flow-{i % 4}") for i in range(20)])
    counts = fairq.Worker(client, work_handlers.slow, processes=True, concurrency=2, batch=3,
                          idle_max=0.05).run(until_idle=True)
    assert (counts["claimed"], counts["acked"], counts["lost"]) == (20, 20, 0)
    assert client.stats().counts == {"ready": 0, "inflight": 0, "acked": 20, "quarantined": 0, "discarded": 0}
    pids = {mark.suffix[1:] for mark in marks.iterdir()}
    assert len(list(marks.iterdir())) == 20 and str(os.getpid()) not in pids  # handled in the children
