"""Crash soak: `fairq work` processes SIGKILLed at random while events flow to an Inbox.

Four worker processes (threads, batches, both) relay events of 50 flows to a
receiver whose Inbox adds each event's delta to its flow's total in the
same transaction as the receipt. The driver feeds the backlog in waves (one
event per flow each) and, once per wave, SIGKILLs a worker that holds a
lease at that moment and starts it again; leases are 1 s, so a killed
worker's events are taken over. Because the work arrives with the kills,
every kill lands while events flow, however fast the machine drains them.
When everything is acked the workers get SIGTERM (each once it logged
`worker.start`, i.e. its signal handlers are in place) and must stop
cleanly. Then every event must be acked exactly once in effect: one receipt
each, every flow's total and last seq exact. Handlers take 5 to 30 ms, so a
kill may land in a handler, a settle or a claim. About 6 s; timeouts here
only stop hangs.
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
from helpers import Receiver

ROOT = Path(__file__).resolve().parent.parent
FLOWS, WAVES = 50, 16  # a wave is one event per flow; one kill per wave
HANG = 60.0  # seconds; only to stop a hung soak
WORKERS = [
    ["--concurrency", "2"],
    ["--batch", "8"],
    ["--concurrency", "3", "--batch", "4"],
    [],
]


class Slot:
    """One of the WORKERS, started again after each kill under a new owner label."""

    def __init__(self, index: int, options: list[str], launch) -> None:
        self.index, self.options, self._launch = index, options, launch
        self.generation = 0
        self.start()

    def start(self) -> None:
        self.generation += 1
        self.owner = f"w{self.index}-{self.generation}"
        self.proc, self.stderr = self._launch(self.owner, self.options)

    def ready(self) -> bool:
        """Its signal handlers are installed: run() logs worker.start only then."""
        return "worker.start" in self.stderr.read_text()


def test_workers_killed_at_random_lose_nothing_and_double_nothing(tmp_path) -> None:
    queue_db, receiver_db = tmp_path / "queue.db", tmp_path / "receiver.db"
    logs, errs = tmp_path / "logs", tmp_path / "stderr"
    logs.mkdir()
    errs.mkdir()
    rng = random.Random(20261129)
    expected: dict[str, int] = {}
    waves = []
    for s in range(WAVES):
        wave = []
        for f in range(FLOWS):
            delta = rng.randint(1, 9)
            expected[f"F{f}"] = expected.get(f"F{f}", 0) + delta
            wave.append((f"F{f}-{s}", {"delta": delta, "work": rng.choice([5, 15, 30])}, f"F{f}"))
        waves.append(wave)
    fairq.Queue(queue_db, max_attempts=1000).close()  # the budget every worker below checks
    Receiver(receiver_db).close()
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_CRASH_AT")}
    env.update(PYTHONPATH=str(ROOT / "src"), FAIRQ_TEST_INBOX=str(receiver_db), FAIRQ_TEST_LOG=str(logs))

    def launch(owner: str, options: list[str]) -> tuple[subprocess.Popen, Path]:
        err = errs / f"{owner}.txt"
        with err.open("w") as err_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "fairq", "--db", str(queue_db), "work", "work_handlers:relay",
                 "--owner", owner, "--lease-seconds", "1", "--max-attempts", "1000", "--stop-timeout", "10",
                 "--log-level", "INFO", *options],
                cwd=ROOT / "tests" / "support", env=env, stdout=subprocess.DEVNULL, stderr=err_file, text=True)
        return proc, err

    def enqueue(wave: list) -> None:
        with fairq.Queue(queue_db) as q:
            q.enqueue_many(wave)

    def holders(slots: list[Slot]) -> list[Slot]:
        with fairq.Queue(queue_db) as q:
            owners = {e.owner for e in q.events(state="inflight", limit=1000)}
        return [slot for slot in slots if slot.owner in owners]

    def acked() -> int:
        with fairq.Queue(queue_db) as q:
            return q.stats().counts["acked"]

    enqueue(waves[0])
    slots = [Slot(i, options, launch) for i, options in enumerate(WORKERS)]
    kills = 0
    began = time.monotonic()
    try:
        for w in range(WAVES):
            if w + 1 < WAVES:
                enqueue(waves[w + 1])  # one wave ahead: the workers are rarely idle
            while not (found := holders(slots)):
                assert time.monotonic() - began < HANG, "no worker took a lease"
                time.sleep(0.01)
            victim = rng.choice(found)
            time.sleep(rng.uniform(0.0, 0.1))  # somewhere in its handling: handler, settle or next claim
            victim.proc.kill()
            victim.proc.wait(timeout=HANG)
            assert victim.proc.returncode == -signal.SIGKILL
            kills += 1
            victim.start()
        while acked() < FLOWS * WAVES:
            assert time.monotonic() - began < HANG, "the backlog was not worked off"
            time.sleep(0.1)
        for slot in slots:
            while not slot.ready():
                assert time.monotonic() - began < HANG, f"{slot.owner} never logged worker.start"
                time.sleep(0.02)
            slot.proc.send_signal(signal.SIGTERM)
        for slot in slots:
            slot.proc.wait(timeout=HANG)
            assert slot.proc.returncode == 0, slot.stderr.read_text()
    finally:
        for slot in slots:
            if slot.proc.poll() is None:
                slot.proc.kill()
    elapsed = time.monotonic() - began

    with fairq.Queue(queue_db) as q:
        stats = q.stats()
        assert stats.counts == {"ready": 0, "inflight": 0, "acked": FLOWS * WAVES, "quarantined": 0, "discarded": 0}
    receiver = Receiver(receiver_db)
    assert receiver.receipts() == FLOWS * WAVES
    assert receiver.projection() == {flow: (total, WAVES) for flow, total in expected.items()}
    receiver.close()
    answers = Counter(line.split()[0] for log in logs.iterdir() for line in log.read_text().splitlines())
    # The log line is written after the receipt commits, so a kill may lose one, never add one.
    assert answers["accepted"] <= FLOWS * WAVES
    assert set(answers) <= {"accepted", "duplicate"}
    print(f"\nsoak: {FLOWS * WAVES} events, {kills} SIGKILLs in {elapsed:.1f} s; "
          f"claims {stats.totals['claimed']}, expired leases taken over {stats.totals['expired']}, "
          f"retries {stats.totals['retried']}; receiver: {dict(answers)}")
    assert kills == WAVES
    assert stats.totals["expired"] >= 1  # the kills left leases behind, and others took them over
