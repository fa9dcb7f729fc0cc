"""Groups under crashes: a real process whose grouped calls are killed.

Killed before the group's COMMIT, no call of the group committed; killed
after it, every call did; and no caller was told "done" (a line on the
child's stdout, written only after its call returned) for work that is not
in the file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fairq
from helpers import SUPPORT, check_invariants

CHILD = SUPPORT / "group_child.py"
CRASH_CODE = 86


def child_env(point: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FAIRQ_CRASH_AT"}
    if point is not None:
        env["FAIRQ_CRASH_AT"] = point
    return env


def prepared(tmp_path: Path) -> Path:
    path = tmp_path / "q.db"
    with fairq.Queue(path) as q:
        q.enqueue("lead", {}, flow="lead")
    return path


@pytest.mark.parametrize("callers", [2, 5, 8])
@pytest.mark.parametrize("point, committed", [("enqueue.before_commit", False), ("settle.before_commit", False),
                                              ("enqueue.after_commit", True), ("settle.after_commit", True)])
def test_a_group_killed_at_its_commit_is_all_or_nothing_and_told_nobody(
        tmp_path: Path, callers: int, point: str, committed: bool) -> None:
    path = prepared(tmp_path)
    done = subprocess.run([sys.executable, str(CHILD), str(path), "group", str(callers)], env=child_env(point),
                          capture_output=True, text=True, timeout=120)  # the timeout only stops a hang
    assert done.returncode == CRASH_CODE, done.stderr
    assert "done" not in done.stdout  # nobody was answered
    with fairq.Queue(path) as q:
        members = [q.get(f"m{i}") for i in range(callers - 1)]
        if committed:
            assert q.get("lead").state == "acked"
            assert all(m is not None and m.state == "ready" for m in members)
        else:
            assert q.get("lead").state == "inflight"
            assert members == [None] * (callers - 1)
    check_invariants(path)


@pytest.mark.parametrize("callers", [2, 8])
def test_an_uncrashed_group_tells_every_caller_done(tmp_path: Path, callers: int) -> None:
    path = prepared(tmp_path)
    done = subprocess.run([sys.executable, str(CHILD), str(path), "group", str(callers)], env=child_env(None),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    told = {line.split()[1] for line in done.stdout.splitlines()}
    assert told == {"lead"} | {f"m{i}" for i in range(callers - 1)}


def test_every_call_a_killed_process_reported_done_is_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    fairq.Queue(path).close()
    child = subprocess.Popen([sys.executable, str(CHILD), str(path), "stream", "8"], env=child_env(None),
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    told = []
    for line in child.stdout:
        told.append(line.split()[1])
        if len(told) >= 300:
            break
    child.send_signal(signal.SIGKILL)  # at whatever moment its threads are in
    rest, _ = child.communicate(timeout=60)
    told += [line.split()[1] for line in rest.splitlines() if line.startswith("done ")]
    with fairq.Queue(path) as q:
        missing = [event_id for event_id in told if q.get(event_id) is None]
    assert missing == []
    check_invariants(path)
