"""Ctrl-C with a hung handler: the first says at once how long the stop waits and that a
second stops now (threads, processes and the async worker alike); a real `fairq work`."""

from __future__ import annotations

import signal
import time

import pytest

import fairq

from helpers import HANG, start, wait_for_marks


def wait_for_text(path, text: str) -> float:
    """Wait until the file (a child's stderr) holds `text`; when it did (monotonic)."""
    deadline = time.monotonic() + HANG
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"no {text!r} in {path.read_text()!r}"
        time.sleep(0.02)
    return time.monotonic()


@pytest.mark.parametrize("mode", [(), ("--processes",)], ids=["threads", "processes"])
def test_the_first_ctrl_c_says_how_long_it_waits_and_the_second_stops_now(tmp_path, marks, mode) -> None:
    db, stderr = tmp_path / "q.db", tmp_path / "stderr"
    with fairq.Queue(db) as q:
        q.enqueue("hung", {"sleep": 60})
    with stderr.open("w") as err_file:
        proc = start(db, "work_handlers:slow", "--stop-timeout", "45", *mode, marks=marks, stderr=err_file)
    try:
        wait_for_marks(marks, 1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        said = wait_for_text(stderr, "Ctrl-C again to stop now")
        assert said - sent < 10  # at once, not when the stop timeout ends
        assert "waiting up to 45 s for running handlers to finish" in stderr.read_text()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=HANG)
        assert proc.returncode == 128 + signal.SIGINT
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
