"""`fairq work` in real subprocesses: backlog, signals, stop timeout, processes, progress line, logs
(refused handlers and settings: in this process).

Handlers come from tests/support/work_handlers.py (the child runs with cwd=tests/support/).
`slow` leaves a mark file when it starts, so a test signals only once a
handler is really running; with body {"until_stopping": true} it runs until
the worker is asked to stop, so what a stop leaves does not depend on how
fast the machine is. Timeouts only stop hangs.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fairq
from helpers import HANG, ROOT, SUPPORT, cli, counts, start, wait_for_marks



#: The body of an event whose `slow` handler runs until the worker is asked to stop.
UNTIL_STOPPING = {"until_stopping": True}


def backlog(db: Path, n: int, body: dict) -> None:
    with fairq.Queue(db) as q:
        q.enqueue_many([(f"e{i}", body) for i in range(n)])


def wait_for_line(path: Path, text: str) -> None:
    """Wait until the file (a child's stderr) holds `text`."""
    deadline = time.monotonic() + HANG
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"no {text!r} in {path.read_text()!r}"
        time.sleep(0.02)


def test_the_example_handler_works_off_a_backlog_from_the_repository_root(tmp_path) -> None:
    db = tmp_path / "fairq.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "examples/handlers.py", "--db", str(db), "--fill", "200"], cwd=ROOT,
                   env=env, check=True, capture_output=True, timeout=HANG)
    proc = start(db, "examples.handlers:handle", "--until-idle", "--concurrency", "4", "--batch", "10",
                 cwd=ROOT)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert "worker.start owner=" in err and "worker.stop claimed=" in err
    after = counts(db)
    assert after["quarantined"] == 0 and after["acked"] > 150  # flaky heads back off; the rest is done
    assert "fairq work: claimed" in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_lets_the_running_handler_finish_and_exits_0(tmp_path, marks, signum) -> None:
    db = tmp_path / "q.db"
    backlog(db, 3, UNTIL_STOPPING)
    proc = start(db, "work_handlers:slow", marks=marks)
    wait_for_marks(marks, 1)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert f"worker.stopping signal={signal.Signals(signum).name}" in err
    assert counts(db) == {"ready": 2, "inflight": 0, "acked": 1, "quarantined": 0, "discarded": 0}
    assert len(list(marks.iterdir())) == 1  # nothing was claimed after the signal


def test_a_second_signal_exits_at_once_and_leaves_the_lease_to_expire(tmp_path, marks) -> None:
    db, stderr = tmp_path / "q.db", tmp_path / "stderr"
    backlog(db, 1, {"sleep": 30})
    with stderr.open("w") as err_file:
        proc = start(db, "work_handlers:slow", marks=marks, stderr=err_file)
    wait_for_marks(marks, 1)
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    wait_for_line(stderr, "worker.stopping signal=SIGTERM")  # the first was handled: two are never one
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=HANG)
    assert proc.returncode == 128 + signal.SIGTERM
    assert time.monotonic() - began < 10
    assert "second SIGTERM: exiting now" in stderr.read_text()
    assert counts(db)["inflight"] == 1


def test_handlers_still_running_after_the_stop_timeout_make_work_exit_1(tmp_path, marks) -> None:
    db = tmp_path / "q.db"
    backlog(db, 1, {"sleep": 30})
    proc = start(db, "work_handlers:slow", "--stop-timeout", "0.3", marks=marks)
    wait_for_marks(marks, 1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 1
    assert "1 handlers were still running after 0.3 s" in err
    assert counts(db)["inflight"] == 1


def test_the_audit_tells_a_killed_run_from_a_handler_failure(tmp_path, marks) -> None:
    # A handler that raised is retried with the error as its reason; a run
    # whose process was killed is settled by nobody: the claim that takes its
    # event again, once the lease ran out, records it expired.
    db = tmp_path / "q.db"
    with fairq.Queue(db, max_attempts=5, backoff=fairq.Backoff(base=60)) as q:
        q.enqueue_many([("bad", {"fail": True}, "f1"), ("hung", {"sleep": 30}, "f2")])
    proc = start(db, "work_handlers:fails_or_sleeps", "--concurrency", "2", "--lease-seconds", "1", marks=marks)
    wait_for_marks(marks, 1)  # "hung" runs
    with fairq.Queue(db) as q:
        deadline = time.monotonic() + HANG
        while q.get("bad").state is not fairq.State.READY:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.kill()
        proc.communicate(timeout=HANG)
        assert [(a.action, a.reason) for a in q.audit("bad")] == [("retry", "ValueError: card declined")]
        hung = q.get("hung")
        assert hung.state is fairq.State.INFLIGHT and q.audit("hung") == []
        time.sleep(max(0.0, hung.lease_until - time.time()) + 0.05)
        again = q.claim()
        assert again is not None and again.event_id == "hung" and again.attempts == 2
        assert [(a.action, a.reason) for a in q.audit("hung")] == [
            ("expired", "lease expired before the holder settled")]


def test_worker_processes_stop_together_on_sigterm(tmp_path, marks) -> None:
    db = tmp_path / "q.db"
    backlog(db, 4, UNTIL_STOPPING)
    proc = start(db, "work_handlers:slow", "--processes", "--concurrency", "2", marks=marks)
    started = wait_for_marks(marks, 2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert counts(db) == {"ready": 2, "inflight": 0, "acked": 2, "quarantined": 0, "discarded": 0}
    child_pids = {int(mark.suffix[1:]) for mark in started}
    assert len(child_pids) == 2 and proc.pid not in child_pids
    for pid in child_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_ctrl_c_on_a_terminal_stops_worker_processes_gracefully(tmp_path, marks) -> None:
    # Ctrl-C reaches the whole process group; the children ignore it and the parent decides.
    db = tmp_path / "q.db"
    backlog(db, 4, UNTIL_STOPPING)
    proc = start(db, "work_handlers:slow", "--processes", "--concurrency", "2", marks=marks,
                 start_new_session=True)
    wait_for_marks(marks, 2)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert counts(db)["acked"] == 2 and counts(db)["inflight"] == 0


def test_a_terminal_gets_a_progress_line(tmp_path) -> None:
    # The line is rewritten every second; the handlers alone take 1.35 s.
    db = tmp_path / "q.db"
    backlog(db, 45, {"sleep": 0.03})
    master, slave = pty.openpty()
    proc = start(db, "work_handlers:slow", "--until-idle", stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed: the child exited
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    proc.wait(timeout=HANG)
    assert proc.returncode == 0
    text = seen.decode()
    assert "\rclaimed " in text and "/s  acked " in text and "quarantined " in text
    assert "acked 45 in all" in text or "fairq work: claimed 45, acked 45" in text


# Refusals before anything runs: in this process (fairq.cli.main, from tests/support/ like the children);
# a real process refusing a handler that fails to import: test_cli_robustness.py.

def test_a_handler_that_cannot_be_imported_is_refused_with_exit_1(tmp_path) -> None:
    db = tmp_path / "q.db"
    fairq.Queue(db).close()
    for spec, message in [("nosuchmodule:handle", "cannot import nosuchmodule"),
                          ("work_handlers:nosuch", "has no nosuch"), ("work_handlers", "MODULE:FUNCTION")]:
        done = cli("--db", str(db), "work", spec, cwd=SUPPORT)
        assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_bad_worker_settings_are_refused_with_exit_1(tmp_path) -> None:
    db = tmp_path / "q.db"
    fairq.Queue(db).close()
    done = cli("--db", str(db), "work", "work_handlers:slow", "--concurrency", "0", cwd=SUPPORT)
    assert done.returncode == 1 and "concurrency" in done.stderr and "Traceback" not in done.stderr
