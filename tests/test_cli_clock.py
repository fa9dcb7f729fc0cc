"""`fairq clock reset` recovers a queue whose stored clock was set ahead; `--now`
far ahead of the wall clock is refused without a traceback."""

from __future__ import annotations

import json
import time

import fairq
from fairq.cli import main


def frozen_queue(path) -> float:
    """A queue whose stored clock is a day ahead, holding one lease; returns the jumped time."""
    ahead = time.time() + 86_400
    with fairq.Queue(path, lease_seconds=30, max_clock_skew=None) as q:
        q.enqueue("held", {}, flow="A", now=ahead)
        q.claim(now=ahead)
    return ahead


def test_clock_reset_moves_a_clock_set_ahead_back_to_the_system_clock(db_path, capsys) -> None:
    ahead = frozen_queue(db_path)
    before = time.time()
    assert main(["--db", str(db_path), "clock", "reset", "--reason", "host clock jumped", "--actor", "ops"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["before"] == round(ahead, 3) and done["leases"] == 1 and done["waits"] == 0
    assert before - 1 <= done["after"] <= time.time() + 1
    with fairq.Queue(db_path) as q:
        assert q.get("held").lease_until == done["after"] + 30
        (row,) = q.audit()
        assert (row.action, row.reason, row.actor) == ("clock_reset", "host clock jumped", "ops")


def test_clock_reset_needs_a_reason(db_path, capsys) -> None:
    frozen_queue(db_path)
    assert main(["--db", str(db_path), "clock", "reset", "--reason", " "]) == 1
    assert capsys.readouterr().err.startswith("fairq: reason:")


def test_tick_at_a_time_far_ahead_of_the_wall_clock_is_refused(db_path, capsys) -> None:
    fairq.Queue(db_path).close()
    assert main(["--db", str(db_path), "tick", "--now", "9.9e10"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fairq: now:") and "max_clock_skew" in err and "Traceback" not in err
