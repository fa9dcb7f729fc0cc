"""`fairq serve` and a threaded Worker let their calls group.

A settle effect on the same Queue holds the connection until the server's
connection threads (or the Worker's threads) are all waiting for it; their
calls then join that settle's transaction and commit with it, once.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import fairq
from helpers import TOKEN, eventually, running


def writers(q: fairq.Queue) -> Any:
    return q._store.db.writers  # type: ignore[attr-defined]


def ack_holding(q: fairq.Queue, waiting: int) -> tuple[threading.Thread, threading.Event]:
    """Ack a fresh event on a thread, its effect keeping the connection until
    `waiting` other calls wait for it; the event is set once the effect runs."""
    q.enqueue("lead", {}, flow="lead")
    lease = q.claim()
    holding = threading.Event()

    def effect(conn: sqlite3.Connection) -> None:
        holding.set()
        assert eventually(lambda: writers(q).waiting >= waiting, seconds=30)

    thread = threading.Thread(target=q.ack, args=(lease,), kwargs={"effect": effect})
    thread.start()
    assert holding.wait(30)
    return thread, holding


def test_requests_on_separate_connections_of_fairq_serve_commit_as_one_group(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    with running(q) as server:
        groups, calls = writers(q).groups, writers(q).calls
        leader, _ = ack_holding(q, 4)
        answers: list[Any] = []

        def request(i: int) -> None:
            client = fairq.Client(server.url, token=TOKEN, timeout=30)
            answers.append(client.enqueue(f"e{i}", {"i": i}, flow=f"f{i}"))

        clients = [threading.Thread(target=request, args=(i,)) for i in range(4)]
        for t in clients:
            t.start()
        for t in clients + [leader]:
            t.join(timeout=60)  # the timeout only stops a hang
        assert sorted(a.event_id for a in answers) == ["e0", "e1", "e2", "e3"]
        # the claim and enqueue of ack_holding, then one group of five calls
        assert (writers(q).groups - groups, writers(q).calls - calls) == (3, 7)
    q.close()


def test_a_threaded_worker_with_batch_1_groups_its_claims(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue_many([(f"e{i}", {"i": i}, f"f{i}") for i in range(4)])
    go = threading.Event()
    started: list[str] = []

    def handler(job: fairq.Job) -> None:
        started.append(job.lease.event_id)
        assert go.wait(30)

    worker = fairq.Worker(q, handler, concurrency=4, batch=1, idle_min=0.01, idle_max=0.01)
    groups, calls = writers(q).groups, writers(q).calls
    leader, _ = ack_holding(q, 4)
    run = threading.Thread(target=worker.run, kwargs={"until_idle": True, "signals": False})
    run.start()
    leader.join(timeout=60)
    assert eventually(lambda: len(started) == 4, seconds=30)
    # the enqueue and claim of ack_holding, then the ack and four claims in one group
    assert (writers(q).groups - groups, writers(q).calls - calls) == (3, 7)
    go.set()
    run.join(timeout=60)
    assert q.stats().counts["acked"] == 5
    q.close()
