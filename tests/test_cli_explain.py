"""`fairq explain`: prints why a flow is blocked, as text and JSON, and the redrive command it
prints works."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import fairq
from helpers import ROOT, cli


def test_explain_prints_the_answer_and_json(tmp_path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
        q.fail(q.claim(now=0), "broken", now=0)
    done = cli("--db", "q.db", "explain", "A", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "flow 'A' is blocked: head a1 (seq 1) is quarantined (broken)" in done.stdout
    assert "fairq --db q.db redrive a1 --expected-generation 1 --reason" in done.stdout
    data = json.loads(cli("--db", "q.db", "explain", "A", "--json", cwd=tmp_path).stdout)
    assert data["why"] == "quarantined" and data["event_id"] == "a1" and data["answer"].startswith("flow 'A'")
    assert cli("--db", "q.db", "explain", "B", cwd=tmp_path).stdout.startswith("flow 'B' is unknown")


def test_the_printed_redrive_command_redrives_the_head(tmp_path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
        q.fail(q.claim(now=0), "broken", now=0)
        command = q.why_blocked("A", now=0).redrive
    assert command.startswith("fairq ")
    done = subprocess.run(f"{shlex.quote(sys.executable)} -m {command}", shell=True, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    with fairq.Queue(tmp_path / "q.db") as q:
        assert q.get("a1").state is fairq.State.READY and q.get("a1").generation == 2
        assert q.why_blocked("A").why == "ready"
