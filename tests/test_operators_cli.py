"""`fairq discard`, `pause`, `resume` and `enqueue --id ... --body ...` on a local file and
against a fairq server; `fairq status` leads with claimable now and blocked flows; and the
mistakes a new user makes in the second hour each get one clear line."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import fairq

from helpers import HANG, TOKEN, running
from helpers import cli as run_cli


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`fairq ARGS` in this process, with the test token and no FAIRQ_DB / FAIRQ_URL unless given."""
    return run_cli(*args, cwd=cwd, env={"FAIRQ_TOKEN": TOKEN, **env}, unset=("FAIRQ_DB", "FAIRQ_URL", "FAIRQ_TOKEN"))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A queue file: flow A with a quarantined head p1 and q2 behind it, flow B with b1."""
    path = tmp_path / "q.db"
    with fairq.Queue(path, max_attempts=1) as q:
        q.enqueue_many([("p1", {"n": 1}, "A"), ("q2", {"n": 2}, "A"), ("b1", {}, "B")])
        lease = q.claim(owner="w")
        assert lease is not None and lease.event_id == "p1"
        q.fail(lease, "poison")
        assert q.get("p1").state is fairq.State.QUARANTINED
    return path


def test_discard_settles_the_poison_head_and_its_flow_moves_on(db, tmp_path) -> None:
    generation = fairq.Queue(db, readonly=True).get("p1").generation
    done = cli("--db", str(db), "discard", "p1", "--expected-generation", str(generation),
               "--reason", "cannot parse", "--actor", "alice", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {"event_id": "p1", "generation": generation + 1, "state": "discarded"}
    with fairq.Queue(db) as q:
        assert q.get("p1").state is fairq.State.DISCARDED
        [row] = [a for a in q.audit("p1") if a.action == "discard"]
        assert (row.reason, row.actor) == ("cannot parse", "alice")
        assert q.why_blocked("A").event_id == "q2"
    again = cli("--db", str(db), "discard", "p1", "--expected-generation", str(generation),
                "--reason", "twice", cwd=tmp_path)
    assert again.returncode == 1 and "generation" in again.stderr and again.stdout == ""


def test_pause_and_resume_a_flow_and_explain_says_paused(db, tmp_path) -> None:
    done = cli("--db", str(db), "pause", "B", "--reason", "vendor down", "--actor", "bob", cwd=tmp_path)
    assert (done.returncode, json.loads(done.stdout)) == (0, {"flow": "B", "paused": True})
    explained = cli("--db", str(db), "explain", "B", cwd=tmp_path)
    assert explained.returncode == 0 and "paused by bob (vendor down)" in explained.stdout
    with fairq.Queue(db) as q:
        assert q.claim(owner="w") is None
    done = cli("--db", str(db), "resume", "B", cwd=tmp_path)
    assert (done.returncode, json.loads(done.stdout)) == (0, {"flow": "B", "paused": False})
    with fairq.Queue(db) as q:
        lease = q.claim(owner="w")
        assert lease is not None and lease.event_id == "b1"
        assert [a.action for a in q.audit() if a.action in ("pause", "resume")] == ["pause", "resume"]


def test_enqueue_one_event_with_id_flow_tenant_body_and_delay(db, tmp_path) -> None:
    done = cli("--db", str(db), "enqueue", "--id", "c1", "--flow", "C", "--tenant", "acme",
               "--body", '{"to": "x@example.com"}', "--delay", "60", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {"created": True, "event_id": "c1", "flow": "C", "seq": 1}
    with fairq.Queue(db) as q:
        info = q.get("c1")
        assert (info.body, info.flow, info.state) == ({"to": "x@example.com"}, "C", fairq.State.READY)
        assert info.next_at is not None and info.next_at > q.stats().now + 50
    bad = cli("--db", str(db), "enqueue", "--id", "c2", "--body", "{nope", cwd=tmp_path)
    assert bad.returncode == 1 and "--body" in bad.stderr and "not JSON" in bad.stderr
    both = cli("--db", str(db), "enqueue", "events.jsonl", "--id", "c3", "--body", "1", cwd=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr
    neither = cli("--db", str(db), "enqueue", cwd=tmp_path)
    assert neither.returncode == 2 and "--id" in neither.stderr
    with fairq.Queue(db) as q:
        assert q.get("c2") is None and q.get("c3") is None


def test_status_leads_with_claimable_now_and_blocked_flows(db, tmp_path) -> None:
    done = cli("--db", str(db), "status", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["claimable", "now", "1"]  # b1; q2 waits behind the quarantined p1
    assert lines[1].startswith("blocked flows     1")
    assert any(line.startswith("flows") and "not yet acked or discarded" in line for line in lines)
    data = json.loads(cli("--db", str(db), "status", "--json", cwd=tmp_path).stdout)
    assert (data["claimable_now"], data["blocked_flows"]) == (1, 1)


# -- against a server ------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "server").mkdir()
    with fairq.Queue(tmp_path / "server" / "served.db") as queue, running(queue, token=TOKEN) as server:
        yield server.url


def test_the_operator_verbs_work_with_url_and_a_trailing_v1(served, tmp_path) -> None:
    for url in (served, served + "/v1", served + "/v1/"):
        event = f"e-{len(url)}"
        done = cli("--url", url, "enqueue", "--id", event, "--flow", "F", "--body", "{}", cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, ""), url
    client = fairq.Client(served + "/v1", token=TOKEN, timeout=HANG)
    assert client.url == served
    first = client.events(flow="F")[0]
    assert cli("--url", served, "pause", "F", "--reason", "look", cwd=tmp_path).returncode == 0
    assert client.claim(owner="w") is None
    assert cli("--url", served, "resume", "F", cwd=tmp_path).returncode == 0
    done = cli("--url", served, "discard", first.event_id, "--expected-generation", str(first.generation),
               "--reason", "not needed", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert client.get(first.event_id).state is fairq.State.DISCARDED
    assert cli("--url", served, "enqueue", "events.jsonl", cwd=tmp_path).returncode == 2


# -- the second hour -------------------------------------------------------------------------------


def test_explain_of_an_unknown_flow_exits_1(db, tmp_path) -> None:
    done = cli("--db", str(db), "explain", "nope", cwd=tmp_path)
    assert done.returncode == 1 and "is unknown" in done.stdout


def test_status_of_a_directory_says_it_is_a_directory(tmp_path) -> None:
    done = cli("status", "--db", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1 and "is a directory" in done.stderr and "I/O" not in done.stderr


def test_a_refused_read_says_unreachable_and_a_write_says_it_may_have_taken_effect(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed on leaving: nothing listens there
    read = cli("--url", url, "status", cwd=tmp_path)
    assert read.returncode == 1 and "unreachable" in read.stderr and "may or may not" not in read.stderr
    write = cli("--url", url, "pause", "F", "--reason", "x", cwd=tmp_path)
    assert write.returncode == 1 and "may or may not" in write.stderr
