"""A real process killed at each named point; recovery ends with one effect, acked.

The child runs with FAIRQ_CRASH_AT=<point> and dies there with os._exit(86):
no finally blocks, no rollback. The parent checks what is durable, lets the
lease run out, runs the relay again and counts receipts and effects.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import fairq
from helpers import SUPPORT, Receiver, step

CHILD = SUPPORT / "crash_child.py"
CRASH_CODE = 86

# (point, event state, receipts) durable right after the crash, relay mode.
RELAY_POINTS = [
    ("claim.before_commit", "ready", 0),
    ("claim.after_commit", "inflight", 0),
    ("receive.before_commit", "inflight", 0),
    ("receive.after_commit", "inflight", 1),
    ("settle.before_commit", "inflight", 1),
    ("settle.after_commit", "acked", 1),
]
# (point, event state, effects) in effect mode: the effect commits with the ACK.
EFFECT_POINTS = [
    ("claim.after_commit", "inflight", 0),
    ("settle.after_effect", "inflight", 0),
    ("settle.before_commit", "inflight", 0),
    ("settle.after_commit", "acked", 1),
]


def run_child(queue_db: Path, receiver_db: Path, mode: str, point: str | None) -> int:
    env = dict(os.environ)
    env.pop("FAIRQ_CRASH_AT", None)
    if point is not None:
        env["FAIRQ_CRASH_AT"] = point
    done = subprocess.run([sys.executable, str(CHILD), str(queue_db), str(receiver_db), mode, "0"],
                          env=env, capture_output=True, text=True, timeout=60)  # timeout only stops a hang
    assert done.returncode in (0, CRASH_CODE), done.stderr
    return done.returncode


def count(path: Path, sql: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("point, state, receipts", RELAY_POINTS, ids=[p[0] for p in RELAY_POINTS])
def test_a_relay_killed_at_each_point_recovers_to_exactly_one_effect(tmp_path, point, state, receipts) -> None:
    queue_db, receiver_db = tmp_path / "queue.db", tmp_path / "receiver.db"
    with fairq.Queue(queue_db, lease_seconds=5, max_attempts=3) as q:
        q.enqueue("A1", {"delta": 7}, flow="A", now=0)
    Receiver(receiver_db).close()

    assert run_child(queue_db, receiver_db, "relay", point) == CRASH_CODE

    with fairq.Queue(queue_db, lease_seconds=5, max_attempts=3) as q:
        assert q.get("A1").state.value == state
        assert count(receiver_db, "SELECT count(*) FROM fairq_receipt") == receipts
        receiver = Receiver(receiver_db)
        # Recovery: after the dead holder's lease (5 s), the relay runs until idle.
        while step(q, receiver, now=10) is not None:
            pass
        assert q.get("A1").state is fairq.State.ACKED
        assert receiver.receipts() == 1
        assert receiver.projection() == {"A": (7, 1)}
        receiver.close()


@pytest.mark.parametrize("point, state, effects", EFFECT_POINTS, ids=[p[0] for p in EFFECT_POINTS])
def test_an_effect_killed_at_each_point_commits_once_with_its_ack(tmp_path, point, state, effects) -> None:
    queue_db = tmp_path / "queue.db"
    with fairq.Queue(queue_db, lease_seconds=5, max_attempts=3) as q:
        q.enqueue("E0003", {"delta": 5000}, now=0)
        conn = sqlite3.connect(queue_db)
        conn.execute("CREATE TABLE effects (event_id TEXT PRIMARY KEY, amount INTEGER NOT NULL)")
        conn.commit()
        conn.close()

    assert run_child(queue_db, tmp_path / "unused.db", "effect", point) == CRASH_CODE

    assert count(queue_db, "SELECT count(*) FROM effects") == effects
    with fairq.Queue(queue_db, lease_seconds=5, max_attempts=3) as q:
        assert q.get("E0003").state.value == state
        if state != "acked":
            lease = q.claim(now=10)
            q.ack(lease, effect=lambda c: c.execute(
                "INSERT INTO effects VALUES (:id, :amount)", {"id": lease.event_id, "amount": 5000}), now=10)
        assert q.get("E0003").state is fairq.State.ACKED
    assert count(queue_db, "SELECT count(*) FROM effects") == 1


def test_without_a_crash_point_the_child_completes(tmp_path) -> None:
    queue_db, receiver_db = tmp_path / "queue.db", tmp_path / "receiver.db"
    with fairq.Queue(queue_db, lease_seconds=5, max_attempts=3) as q:
        q.enqueue("A1", {"delta": 7}, flow="A", now=0)
    Receiver(receiver_db).close()
    assert run_child(queue_db, receiver_db, "relay", None) == 0
    with fairq.Queue(queue_db) as q:
        assert q.get("A1").state is fairq.State.ACKED
