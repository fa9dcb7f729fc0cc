"""`fairq explain`: prints why a flow is blocked, as text and JSON, and the redrive and discard
commands it prints for a quarantined head work."""

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
    assert data["discard"] == "fairq --db q.db discard a1 --expected-generation 1 --reason '<why it must never run>'"
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


def run_printed(command: str, cwd) -> subprocess.CompletedProcess:
    """A command `fairq explain` printed, run by the shell as an operator would paste it."""
    return subprocess.run(f"{shlex.quote(sys.executable)} -m {command}", shell=True, cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_a_quarantined_head_names_both_ways_on_and_the_printed_discard_moves_the_flow_on(tmp_path) -> None:
    with fairq.Queue(tmp_path / "orders.db") as q:
        q.enqueue_many([("o1", {}, "orders-7"), ("o2", {}, "orders-7"), ("o3", {}, "orders-7")], now=0)
        q.fail(q.claim(now=0), "cannot parse", now=0)
        q.redrive("o1", expected_generation=1, reason="parser fixed", actor="ops", now=1)
        q.fail(q.claim(now=1), "still cannot parse", now=1)  # quarantined again: generation 3
    done = cli("--db", "orders.db", "explain", "orders-7", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    redrive = "fairq --db orders.db redrive o1 --expected-generation 3 --reason '<why it is safe to run again>'"
    discard = "fairq --db orders.db discard o1 --expected-generation 3 --reason '<why it must never run>'"
    assert done.stdout == (
        "flow 'orders-7' is blocked: head o1 (seq 1) is quarantined (still cannot parse); 2 more wait behind it. "
        f"Two ways on. Run it again: {redrive}; or skip it on the record (it becomes discarded and the flow "
        f"moves on): {discard}\n")
    pasted = run_printed(discard.replace("<why it must never run>", "a body no handler reads"), tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert json.loads(pasted.stdout) == {"event_id": "o1", "generation": 4, "state": "discarded"}
    after = cli("--db", "orders.db", "explain", "orders-7", cwd=tmp_path)
    assert after.stdout.startswith("flow 'orders-7' is not blocked: head o2 (seq 2) is claimable now")
    with fairq.Queue(tmp_path / "orders.db") as q:
        last = q.audit("o1")[-1]
        assert (last.action, last.reason, last.generation) == ("discard", "a body no handler reads", 4)
