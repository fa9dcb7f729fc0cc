"""`fairq work`: worker processes share a backlog and a hung one is replaced, a refused handler
(real processes); --until-empty and --until-idle, ticking schedules, its log lines, its help (in
this process: fairq.cli.main). Timeouts only stop hangs."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import fairq
from helpers import HANG, SUPPORT, cli, counts, start


def run(db: Path, *args: str, **kw) -> tuple[int, str]:
    """`fairq --db DB work ARGS` as a real process; (exit status, stderr)."""
    proc = start(db, *args, **kw)
    out, err = proc.communicate(timeout=HANG)
    return proc.returncode, err


def run_here(db: Path, *args: str) -> tuple[int, str]:
    """`fairq --db DB work ARGS` in this process (fairq.cli.main) from tests/support/, as `run` runs
    it: for what does not need a process of its own (stop modes, ticking, log lines)."""
    done = cli("--db", str(db), "work", *args, cwd=SUPPORT)
    return done.returncode, done.stderr


def test_worker_processes_each_claim_part_of_a_backlog_across_eight_flows(tmp_path) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        q.enqueue_many([(f"f{f}-{i}", {"sleep": 0.2}, f"F{f}") for f in range(8) for i in range(6)])
    code, err = run(db, "work_handlers:steady", "--processes", "--concurrency", "4", "--batch", "50",
                    "--until-idle")
    assert code == 0, err
    claimed = [int(n) for n in re.findall(r"worker\.stop claimed=(\d+)", err)]
    assert len(claimed) == 4, err
    assert all(n > 0 for n in claimed), claimed
    assert counts(db)["acked"] == 48


def test_until_empty_waits_for_retries_in_backoff_and_until_idle_does_not(tmp_path) -> None:
    for mode, left in (("--until-idle", 4), ("--until-empty", 0)):
        db = tmp_path / f"q{mode}.db"
        with fairq.Queue(db) as q:
            q.enqueue_many([(f"e{i}", {"delay": 0.3}, f"F{i}") for i in range(4)] + [("bad", {"fail": True})])
        code, err = run_here(db, "work_handlers:retry_once", mode)
        assert code == 0, err
        after = counts(db)
        assert after["ready"] == left and after["quarantined"] == 1, (mode, after)


def test_help_names_each_stop_mode(tmp_path) -> None:
    text = " ".join(cli("--db", str(tmp_path / "q.db"), "work", "--help", cwd=tmp_path).stdout.split())
    assert "--until-empty" in text and "--until-idle" in text and "--timeout" in text and "--no-tick" in text
    assert "quarantined" in text and "backoff" in text


def test_a_hung_handler_process_is_killed_at_its_timeout_and_replaced(tmp_path, marks) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db, max_attempts=1) as q:  # the stored budget: one claim per round
        q.enqueue_many([("hang", {"sleep": 600}, "H")] + [(f"e{i}", {"sleep": 0}, "E") for i in range(3)])
    began = time.monotonic()
    # The timeout is well above a quick handler's time even on a loaded machine: a
    # quick handler stalled past it would be taken back too (and quarantined here).
    code, err = run(db, "work_handlers:slow", "--processes", "--timeout", "3", "--max-attempts", "1",
                    "--until-empty", marks=marks)
    assert code == 0, err
    assert time.monotonic() - began < 30
    with fairq.Queue(db) as q:
        hang = q.get("hang")
        assert hang.state is fairq.State.QUARANTINED and "timeout" in hang.reason
        states = {f"e{i}": (q.get(f"e{i}").state, q.get(f"e{i}").reason) for i in range(3)}
        assert all(state is fairq.State.ACKED for state, _ in states.values()), (states, err)
    assert "event=handler.timeout event_id=hang" in err and "event=worker.replaced" in err


def test_work_ticks_schedules_unless_told_not_to(tmp_path) -> None:
    for flag, expected in ((), 1), (("--no-tick",), 0):
        db = tmp_path / f"q{len(flag)}.db"
        with fairq.Queue(db) as q:
            q.schedules.add("report", every=3600, start=time.time() - 10)
        code, err = run_here(db, "work_handlers:steady", "--until-idle", *flag)
        assert code == 0, err
        assert counts(db)["acked"] == expected


def test_a_handler_that_cannot_take_a_job_is_refused_before_anything_is_claimed(tmp_path) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        q.enqueue("a", {})
    done = cli("--db", str(db), "work", "work_handlers:takes_nothing", "--until-idle", cwd=SUPPORT)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "handler" in done.stderr
    assert "cannot be called with one argument" in run(db, "work_handlers:takes_nothing")[1]  # a real process
    assert counts(db)["ready"] == 1


def test_work_logs_the_handlers_own_lines_and_which_database_it_drains(tmp_path) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        q.enqueue("a", {})
    code, err = run_here(db, "work_handlers:steady", "--until-idle")
    assert code == 0, err
    assert "handling a in" in err
    assert f"db={db}" in err
    records = [line for line in err.splitlines() if not line.startswith("fairq work: ")]
    assert records and all(re.match(r"^time=\S+ level=[A-Z]+ logger=\S+ pid=\d+ ", line) for line in records), err


def test_work_logs_json_one_object_per_line(tmp_path) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        q.enqueue("a", {"fail": True})
    code, err = run_here(db, "work_handlers:retry_once", "--until-idle", "--log-format", "json")
    assert code == 0, err
    records = [json.loads(line) for line in err.splitlines() if not line.startswith("fairq work: ")]
    assert {"time", "level", "logger", "pid", "message"} <= set(records[0])
    [quarantine] = [r for r in records if r["level"] == "ERROR"]
    assert quarantine["logger"] == "fairq.worker" and "refused by the test" in quarantine["message"]
