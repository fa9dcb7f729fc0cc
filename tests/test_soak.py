"""Crash soak: `fairq work` processes SIGKILLed at random while events flow to an Inbox.

Four worker processes (threads, batches, both) relay events of 50 flows to a
receiver whose Inbox adds each event's delta to its flow's total in the
same transaction as the receipt. A driver SIGKILLs a random worker every
few hundred milliseconds and starts it again; leases are 1 s, so a killed
worker's events are taken over. When everything is acked the workers get
SIGTERM and must stop cleanly. Then every event must be acked exactly once
in effect: one receipt each, every flow's total and last seq exact. Bounded
to about 20 s; timeouts here only stop hangs.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import fairq
from relay import Receiver

ROOT = Path(__file__).resolve().parent.parent
FLOWS, PER_FLOW = 50, 16
KILL_PHASE = 12.0  # seconds of random kills at most
HANG = 45.0  # seconds; only to stop a hung soak
WORKERS = [
    ["--concurrency", "2"],
    ["--batch", "8"],
    ["--concurrency", "3", "--batch", "4"],
    [],
]


def test_workers_killed_at_random_lose_nothing_and_double_nothing(tmp_path) -> None:
    queue_db, receiver_db, logs = tmp_path / "queue.db", tmp_path / "receiver.db", tmp_path / "logs"
    logs.mkdir()
    rng = random.Random(20261129)
    expected: dict[str, int] = {}
    with fairq.Queue(queue_db) as q:
        items = []
        for f in range(FLOWS):
            for s in range(PER_FLOW):
                delta = rng.randint(1, 9)
                expected[f"F{f}"] = expected.get(f"F{f}", 0) + delta
                items.append((f"F{f}-{s}", {"delta": delta, "work": rng.choice([10, 30, 60])}, f"F{f}"))
        q.enqueue_many(items)
    Receiver(receiver_db).close()
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_CRASH_AT")}
    env.update(PYTHONPATH=str(ROOT / "src"), FAIRQ_TEST_INBOX=str(receiver_db), FAIRQ_TEST_LOG=str(logs))

    def launch(options: list[str]) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "fairq", "--db", str(queue_db), "work", "work_handlers:relay",
             "--lease-seconds", "1", "--max-attempts", "1000", "--stop-timeout", "10", "--log-level", "WARNING",
             *options], cwd=ROOT / "tests", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def acked() -> int:
        with fairq.Queue(queue_db) as q:
            return q.stats().counts["acked"]

    workers = [launch(options) for options in WORKERS]
    kills = 0
    began = time.monotonic()
    try:
        while time.monotonic() - began < KILL_PHASE and acked() < FLOWS * PER_FLOW:
            time.sleep(rng.uniform(0.1, 0.4))
            i = rng.randrange(len(workers))
            workers[i].kill()
            workers[i].communicate(timeout=HANG)
            assert workers[i].returncode == -signal.SIGKILL
            kills += 1
            workers[i] = launch(WORKERS[i])
        while acked() < FLOWS * PER_FLOW:
            assert time.monotonic() - began < HANG, "the backlog was not worked off"
            time.sleep(0.1)
        time.sleep(1.0)  # a worker started a moment ago installs its signal handlers first
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            _, err = worker.communicate(timeout=HANG)
            assert worker.returncode == 0, err
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    elapsed = time.monotonic() - began

    with fairq.Queue(queue_db) as q:
        stats = q.stats()
        assert stats.counts == {"ready": 0, "inflight": 0, "acked": FLOWS * PER_FLOW, "quarantined": 0}
    receiver = Receiver(receiver_db)
    assert receiver.receipts() == FLOWS * PER_FLOW
    assert receiver.projection() == {flow: (total, PER_FLOW) for flow, total in expected.items()}
    receiver.close()
    answers = Counter(line.split()[0] for log in logs.iterdir() for line in log.read_text().splitlines())
    # The log line is written after the receipt commits, so a kill may lose one, never add one.
    assert answers["accepted"] <= FLOWS * PER_FLOW
    assert set(answers) <= {"accepted", "duplicate"}
    print(f"\nsoak: {FLOWS * PER_FLOW} events, {kills} SIGKILLs in {elapsed:.1f} s; "
          f"claims {stats.totals['claimed']}, expired leases taken over {stats.totals['expired']}, "
          f"retries {stats.totals['retried']}; receiver: {dict(answers)}")
    assert kills >= 5
