"""`fairq serve`'s connections let their calls group.

A settle effect on the same Queue holds the connection until the server's
connection threads are all waiting for it; their calls then join that
settle's transaction and commit with it, once. (A threaded Worker's threads
about to claim share one claim_many instead, and those finishing together
one settle_many: tests/test_worker_claim_ahead.py.)
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
