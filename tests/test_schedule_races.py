"""Processes ticking the same file at once, or killed mid-tick, never double-create or lose a slot.

Assertions are on the sets of slots, never on which process won. Timeouts
exist only to stop a hang.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import fairq
import schedule_workers
from fairq import _crash

CTX = multiprocessing.get_context("spawn")
HANG = 120  # seconds; only to stop a hung test
ROOT = Path(__file__).resolve().parent.parent
CRASH_CODE = _crash.EXIT_CODE


def test_four_processes_ticking_at_once_create_each_slot_exactly_once(tmp_path) -> None:
    path = str(tmp_path / "queue.db")
    start = int(time.time()) - 30  # 1500 slots due: the first tick meets the cap
    with fairq.Queue(path) as q:
        q.schedules.add("all", every=0.02, start=start, misfire="all", overlap=True)
        q.schedules.add("coalesce", every=0.02, start=start, overlap=True)
    barrier = CTX.Barrier(4)
    results = CTX.Queue()
    procs = [CTX.Process(target=schedule_workers.tick_repeatedly, args=(path, 15, barrier, results))
             for _ in range(4)]
    for p in procs:
        p.start()
    created = Counter(event_id for _ in procs for event_id in results.get(timeout=HANG))
    for p in procs:
        p.join(timeout=HANG)
        assert p.exitcode == 0
    assert created and max(created.values()) == 1  # no instance was created twice

    with fairq.Queue(path) as q:
        events = {e.event_id for e in q.events(limit=1_000_000)}
        missed = Counter(slot_id for a in q.audit() if a.action == "misfire" for slot_id in slots_of(q, a))
        assert set(created) == events
        assert not missed or max(missed.values()) == 1
        for name in ("all", "coalesce"):
            schedule = q.schedules.get(name)
            n = round((schedule.last_slot - start) / 0.02) + 1
            expected = {schedule.instance_id(start + k * 0.02) for k in range(n)}
            mine = {e for e in events if e.startswith(name + "@")}
            missed_here = {m for m in missed if m.startswith(name + "@")}
            assert not mine & missed_here
            assert mine | missed_here == expected  # every slot decided once, none lost
        assert not {m for m in missed if m.startswith("all@")}
        assert len([e for e in events if e.startswith("all@")]) >= 1000


def slots_of(q: fairq.Queue, row: fairq.AuditEntry) -> list[str]:
    """The instance ids a misfire row stands for: its own, or each of a long run's."""
    if "count" not in row.detail:
        return [row.event_id]
    schedule = q.schedules.get(row.detail["schedule"])
    first = datetime.datetime.fromisoformat(row.detail["slot"].replace("Z", "+00:00")).timestamp()
    return [schedule.instance_id(first + k * schedule.every) for k in range(row.detail["count"])]


def run_tick(path, point: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_CRASH_AT", "FAIRQ_DB")}
    env["PYTHONPATH"] = str(ROOT / "src")
    if point is not None:
        env["FAIRQ_CRASH_AT"] = point
    done = subprocess.run([sys.executable, "-m", "fairq", "--db", str(path), "tick", "--now", "55"],
                          env=env, capture_output=True, text=True, timeout=HANG)
    return done.returncode


@pytest.mark.parametrize("point, instances", [("tick.before_commit", 0), ("tick.after_commit", 1)])
def test_a_tick_killed_at_its_commit_leaves_all_of_it_or_none(tmp_path, point, instances) -> None:
    path = tmp_path / "queue.db"
    with fairq.Queue(path) as q:
        q.schedules.add("report", every=10, start=20)
    assert run_tick(path, point) == CRASH_CODE
    with fairq.Queue(path) as q:
        assert len(q.events()) == instances
        assert len([a for a in q.audit() if a.action == "misfire"]) == 3 * instances
        assert q.schedules.get("report").next_slot == (60.0 if instances else 20.0)
    # The next tick finishes the job, once.
    assert run_tick(path, None) == 0
    with fairq.Queue(path) as q:
        assert [e.event_id for e in q.events()] == ["report@1970-01-01T00:00:50Z"]
        assert [a.event_id for a in q.audit() if a.action == "misfire"] == [
            f"report@1970-01-01T00:00:{s}Z" for s in (20, 30, 40)]
