"""Many processes and threads on one real file.

Assertions are on the set of ids and final states, never on who won.
Timeouts here exist only to stop a hang.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter

import fairq
import conc_workers

CTX = multiprocessing.get_context("spawn")
HANG = 120  # seconds; only to stop a hung test


def run_processes(target, args_for, n: int) -> list:
    barrier = CTX.Barrier(n)
    results = CTX.Queue()
    procs = [CTX.Process(target=target, args=(*args_for(i), barrier, results)) for i in range(n)]
    for p in procs:
        p.start()
    out = [results.get(timeout=HANG) for _ in procs]
    for p in procs:
        p.join(timeout=HANG)
        assert p.exitcode == 0
    return out


def run_threads(work, n: int) -> list[BaseException]:
    """Run work() in n threads at once; the errors they raised."""
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=HANG)
    return errors


def test_eight_processes_racing_claim_only_the_heads(tmp_path) -> None:
    path = str(tmp_path / "queue.db")
    with fairq.Queue(path) as q:
        for flow in "ABC":
            q.enqueue_many([(f"{flow}1", {}, flow), (f"{flow}2", {}, flow)], now=0)
    got = run_processes(conc_workers.race_one_claim, lambda i: (path,), 8)
    claimed = sorted(x for x in got if x is not None)
    assert claimed == ["A1", "B1", "C1"]
    assert got.count(None) == 5
    with fairq.Queue(path) as q:
        assert {e.event_id for e in q.events(state="inflight")} == {"A1", "B1", "C1"}
        assert q.stats(now=0).counts == {"ready": 3, "inflight": 3, "acked": 0, "quarantined": 0, "discarded": 0}


def test_eight_processes_drain_a_backlog_once_each_in_flow_order(tmp_path) -> None:
    path = str(tmp_path / "queue.db")
    ids = []
    with fairq.Queue(path) as q:
        items = []
        for flow in range(20):
            for seq in range(10):
                items.append((f"f{flow}-{seq}", {"seq": seq}, f"flow-{flow}"))
        for i in range(100):
            items.append((f"u{i}", {"i": i}))  # unordered
        q.enqueue_many(items)
        ids = [item[0] for item in items]
    got = run_processes(conc_workers.drain, lambda i: (path, f"w{i}"), 8)
    claims = Counter(event_id for _, claimed, _ in got for event_id, _ in claimed)
    violations = [v for _, _, vs in got for v in vs]
    assert violations == []
    assert set(claims) == set(ids)
    assert max(claims.values()) == 1  # nobody claimed a live lease twice
    with fairq.Queue(path) as q:
        assert q.stats().counts == {"ready": 0, "inflight": 0, "acked": 300, "quarantined": 0, "discarded": 0}


def test_processes_opening_a_fresh_file_at_once_all_succeed(tmp_path) -> None:
    path = str(tmp_path / "fresh.db")
    got = run_processes(conc_workers.open_fresh, lambda i: (path,), 6)
    assert got == ["ok"] * 6
    with fairq.Queue(path) as q:
        assert q.stats().counts["ready"] == 6


def test_threads_sharing_one_queue_drain_without_duplicates(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % 7}") for i in range(300)], now=0)
    seen: list[str] = []

    def work() -> None:
        while (lease := q.claim(lease_seconds=600)) is not None or q.stats().counts["ready"]:
            if lease is not None:
                seen.append(lease.event_id)
                q.ack(lease)

    assert run_threads(work, 6) == []
    assert sorted(seen) == sorted(f"e{i}" for i in range(300))
    assert q.stats().counts["acked"] == 300


def test_threads_with_a_queue_each_drain_without_duplicates(db_path) -> None:
    with fairq.Queue(db_path, lease_seconds=600) as q:
        q.enqueue_many([(f"e{i}", {}, f"f{i % 5}") for i in range(200)])
    seen: list[str] = []

    def work() -> None:
        with fairq.Queue(db_path, lease_seconds=600, busy_timeout=30) as mine:
            idle = 0
            while idle < 3:
                lease = mine.claim()
                if lease is None:
                    idle += 1
                    continue
                idle = 0
                seen.append(lease.event_id)
                mine.ack(lease)

    assert run_threads(work, 4) == []
    assert Counter(seen) == Counter(f"e{i}" for i in range(200))
