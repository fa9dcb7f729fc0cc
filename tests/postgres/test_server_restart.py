"""The server stops hard (`pg_ctl -m immediate stop`) and comes back while a worker
(fairq.Worker, or fairq.aio.AsyncWorker for an async handler) drains: the worker waits
it out, and after recovery nothing is lost or done twice."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import fairq
import pgcluster
from helpers import Receiver, start

HANG = 120  # seconds; only to stop a hung test
RESTARTS = 2



@pytest.mark.parametrize("handler", ["pg_handlers:history_relay", "pg_handlers:history_relay_async"],
                         ids=["Worker", "AsyncWorker"])
def test_a_worker_survives_immediate_server_restarts_with_nothing_lost_or_doubled(
        tmp_path: Path, handler: str, own_cluster: pgcluster.Cluster) -> None:
    receiver_db = tmp_path / "receiver.db"
    Receiver(receiver_db).close()
    flows, per_flow = 8, 40
    total = flows * per_flow
    logs, hist = tmp_path / "log", tmp_path / "history"
    logs.mkdir()
    hist.mkdir()
    cluster = own_cluster
    with fairq.Queue(cluster.url, lease_seconds=1) as q:
        q.enqueue_many([(f"f{f}-{s}", {"delta": f * 10 + s, "work": 5}, f"f{f}")
                        for s in range(1, per_flow + 1) for f in range(flows)])
    os.environ.update(FAIRQ_TEST_INBOX=str(receiver_db), FAIRQ_TEST_LOG=str(logs),
                      FAIRQ_TEST_HISTORY=str(hist))
    try:
        worker = start(cluster.url, handler, "--no-tick", "--concurrency", "2",
                       marks=tmp_path)
    finally:
        for key in ("FAIRQ_TEST_INBOX", "FAIRQ_TEST_LOG", "FAIRQ_TEST_HISTORY"):
            os.environ.pop(key)
    restarts = 0
    try:
        receiver = Receiver(receiver_db)
        deadline = time.monotonic() + HANG
        for i in range(RESTARTS):
            while receiver.receipts() < total * (i + 1) // (RESTARTS + 2):
                assert time.monotonic() < deadline and worker.poll() is None
                time.sleep(0.02)
            cluster.stop("immediate")
            time.sleep(0.5)  # the worker meets the server gone
            cluster.start()
            restarts += 1
        while receiver.receipts() < total:
            assert time.monotonic() < deadline and worker.poll() is None, receiver.receipts()
            time.sleep(0.05)
        with fairq.Queue(cluster.url) as q:
            while q.stats(top=0).counts["acked"] < total:  # the last acks after the last effects
                assert time.monotonic() < deadline
                time.sleep(0.05)
            counts = q.stats(top=0).counts
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=HANG)
    print(f"restarts: {restarts}")
    assert restarts == RESTARTS
    assert worker.returncode == 0, err
    assert "queue.unavailable" in err  # it met the server gone, and went on
    assert receiver.receipts() == total  # nothing lost
    expected = {f"f{f}": (sum(f * 10 + s for s in range(1, per_flow + 1)), per_flow) for f in range(flows)}
    assert receiver.projection() == expected  # nothing done twice
    receiver.close()
    assert counts["acked"] == total and counts["inflight"] == counts["ready"] == 0


def test_a_queue_whose_connection_was_cut_reconnects(pg_url: str) -> None:
    import uuid

    import psycopg

    victim = f"fairq-cut-{uuid.uuid4().hex[:8]}"
    with fairq.Queue(f"{pg_url}&application_name={victim}") as q:
        q.enqueue("e", {})
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                          (victim,))
        with pytest.raises(fairq.Unavailable):
            q.claim()
        q.reconnect()
        lease = q.claim()
        assert lease is not None and lease.event_id == "e"
        assert q.ack(lease).state is fairq.State.ACKED
