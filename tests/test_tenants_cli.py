"""`fairq tenants` and `fairq set-tenant NAME ...` on a local file and against a fairq
server, `fairq explain` on a flow its tenant holds back, and `fairq enqueue` lines with a
tenant: what they print, what they store, and one clear line for bad input."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import fairq
from fairq.cli import main
from fairq.cli._common import when

from helpers import HANG, TOKEN, fairq_cli, running
from helpers import cli as run_cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A fresh queue file: acme's two flows (one leased), globex's one flow."""
    path = str(tmp_path / "q.db")
    with fairq.Queue(path) as q:
        q.enqueue_many([("a1", {}, "acme-1", "acme"), ("a2", {}, "acme-2", "acme"), ("g1", {}, "globex-1", "globex")])
    return path


def test_set_tenant_prints_the_tenant_as_stored_and_writes_one_audit_row(db, capsys) -> None:
    status, out, err = run(capsys, "--db", db, "set-tenant", "acme", "--weight", "3", "--max-inflight", "1",
                           "--rate", "5", "--reason", "gold plan", "--actor", "alice")
    assert (status, err) == (0, "")
    shown = json.loads(out)
    assert {k: shown[k] for k in ("name", "weight", "max_inflight", "rate", "burst", "ready", "flows")} == {
        "name": "acme", "weight": 3, "max_inflight": 1, "rate": 5, "burst": 5, "ready": 2, "flows": 2}
    # Options left out keep what is stored.
    status, out, _ = run(capsys, "--db", db, "set-tenant", "acme", "--burst", "9")
    assert status == 0 and (json.loads(out)["weight"], json.loads(out)["burst"]) == (3, 9)
    with fairq.Queue(db) as q:
        [acme, _] = q.tenants()
        rows = [row for row in q.audit() if row.action == "set_tenant"]
    assert (acme.weight, acme.max_inflight, acme.rate, acme.burst) == (3, 1, 5, 9)
    assert [(row.reason, row.actor) for row in rows] == [("gold plan", "alice"), (None, None)]


def test_tenants_lists_each_tenant_and_the_limit_that_holds_it(db, capsys) -> None:
    assert run(capsys, "--db", db, "set-tenant", "acme", "--max-inflight", "1")[0] == 0
    with fairq.Queue(db) as q:
        lease = q.claim(owner="w1", lease_seconds=300)
        assert lease is not None and lease.event_id == "a1"
    status, out, err = run(capsys, "--db", db, "tenants")
    assert (status, err) == (0, "")
    header, acme, globex = out.splitlines()
    assert header.split() == ["NAME", "WEIGHT", "MAX_INFLIGHT", "RATE/BURST", "INFLIGHT", "READY", "FLOWS",
                              "TOKENS", "LIMITED_BY", "UNTIL"]
    assert acme.split()[:9] == ["acme", "1", "1", "-", "1", "1", "2", "-", "max_inflight"]
    assert acme.split()[9] == when(lease.lease_until)  # the lease that holds the slot
    assert globex.split() == ["globex", "1", "-", "-", "0", "1", "1", "-", "-", "-"]
    status, out, _ = run(capsys, "--db", db, "tenants", "--json")
    listed = json.loads(out)
    assert [t["name"] for t in listed] == ["acme", "globex"]
    assert (listed[0]["limited_by"], listed[0]["until"], listed[0]["inflight"]) == ("max_inflight",
                                                                                    lease.lease_until, 1)


def test_explain_says_which_limit_of_the_tenant_holds_the_flow(db, capsys) -> None:
    assert run(capsys, "--db", db, "set-tenant", "acme", "--max-inflight", "1")[0] == 0
    with fairq.Queue(db) as q:
        assert q.claim(owner="w1", lease_seconds=300) is not None
    status, out, _ = run(capsys, "--db", db, "explain", "acme-2")
    assert status == 0
    assert out.startswith("flow 'acme-2' waits for its tenant 'acme': head a2 (seq 1) is due, but the tenant "
                          "has max_inflight events leased")
    status, out, _ = run(capsys, "--db", db, "explain", "acme-2", "--json")
    data = json.loads(out)
    assert (data["why"], data["tenant"]) == ("tenant_cap", "acme")
    assert run(capsys, "--db", db, "set-tenant", "globex", "--rate", "1", "--burst", "1")[0] == 0
    with fairq.Queue(db) as q:
        q.enqueue("g2", {}, flow="globex-2", tenant="globex")
        taken = q.claim(owner="w1")
        assert taken is not None and taken.event_id == "g1"
    out = run(capsys, "--db", db, "explain", "globex-2")[1]
    assert out.startswith("flow 'globex-2' waits for its tenant 'globex': head g2 (seq 1) is due, but the "
                          "tenant's rate limit allows its next claim at ")


def test_metrics_prints_the_tenant_gauges(db, capsys) -> None:
    assert run(capsys, "--db", db, "set-tenant", "acme", "--max-inflight", "1")[0] == 0
    with fairq.Queue(db) as q:
        assert q.claim(owner="w1", lease_seconds=300) is not None
    status, out, err = run(capsys, "--db", db, "metrics")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    for line in ['fairq_tenant_ready{tenant="acme"} 1', 'fairq_tenant_inflight{tenant="acme"} 1',
                 'fairq_tenant_held{tenant="acme"} 1', 'fairq_tenant_ready{tenant="globex"} 1',
                 'fairq_tenant_held{tenant="globex"} 0']:
        assert line in lines
    assert not [line for line in lines if line.startswith('fairq_tenant_') and 'tenant="other"' in line]


def test_tenants_pages_with_after_and_says_where_the_next_page_starts(tmp_path, capsys) -> None:
    db = str(tmp_path / "q.db")
    with fairq.Queue(db) as q:
        for name in ["t3", "t1", "t4", "t2", "t5"]:
            q.set_tenant(name)
    status, out, err = run(capsys, "--db", db, "tenants", "--limit", "2", "--json")
    assert status == 0 and [t["name"] for t in json.loads(out)] == ["t1", "t2"]
    assert err == "fairq: showing 2 tenants; the next page: --after t2\n"
    status, out, err = run(capsys, "--db", db, "tenants", "--after", "t2", "--limit", "3", "--json")
    assert (status, err) == (0, "") and [t["name"] for t in json.loads(out)] == ["t3", "t4", "t5"]


@pytest.mark.parametrize(("option", "value", "field"), [
    ("--weight", "0", "weight"), ("--weight", "1001", "weight"), ("--max-inflight", "-1", "max_inflight"),
    ("--rate", "-5", "rate"), ("--burst", "-1", "burst"), ("--actor", "", "actor"),
])
def test_a_bad_setting_is_refused_in_one_line_naming_the_field_and_nothing_is_written(
        db, capsys, option: str, value: str, field: str) -> None:
    assert run(capsys, "--db", db, "set-tenant", "acme", "--weight", "2")[0] == 0
    with fairq.Queue(db) as q:
        before = (q.tenants(), q.audit())
    status, out, err = run(capsys, "--db", db, "set-tenant", "acme", option, value)
    assert (status, out) == (1, "")
    assert err.startswith(f"fairq: {field}: ") and err.count("\n") == 1 and "Traceback" not in err
    with fairq.Queue(db) as q:
        assert (q.tenants(), q.audit()) == before


def test_bad_names_and_values_are_refused_without_a_traceback(db, capsys) -> None:
    status, out, err = run(capsys, "--db", db, "set-tenant", "", "--weight", "2")
    assert (status, out) == (1, "") and err.startswith("fairq: tenant: ")
    status, out, err = run(capsys, "--db", db, "set-tenant", "acme", "--rate", "5000", "--burst", "1")
    assert (status, out) == (1, "") and err.startswith("fairq: burst: ") and err.count("\n") == 1
    status, out, err = run(capsys, "--db", db, "set-tenant", "acme", "--weight", "1.5")
    assert (status, out) == (2, "") and "invalid int value" in err
    status, out, err = run(capsys, "--db", db, "tenants", "--limit", "0")
    assert (status, out) == (1, "") and err.startswith("fairq: limit: ")
    status, out, err = run(capsys, "--db", db, "tenants", "--after", "")
    assert (status, out) == (1, "") and err.startswith("fairq: after: ")


def test_the_commands_refuse_a_missing_database_and_create_none(tmp_path, capsys) -> None:
    absent = tmp_path / "absent.db"
    for argv in (["set-tenant", "acme", "--weight", "2"], ["tenants"]):
        status, out, err = run(capsys, "--db", str(absent), *argv)
        assert (status, out) == (1, "") and err.startswith("fairq: ") and "Traceback" not in err
        assert not absent.exists()


def test_enqueue_takes_a_tenant_on_each_line_and_refuses_a_flow_of_another_tenant(db, tmp_path, capsys) -> None:
    lines = tmp_path / "more.jsonl"
    lines.write_text('{"event_id": "a3", "body": {}, "flow": "acme-3", "tenant": "acme"}\n'
                     '{"event_id": "n1", "body": {}, "flow": "new-1", "tenant": "initech"}\n')
    status, out, err = run(capsys, "--db", db, "enqueue", str(lines))
    assert (status, err) == (0, "") and json.loads(out) == {"created": 2, "duplicates": 0, "lines": 2}
    with fairq.Queue(db) as q:
        assert [(t.name, t.flows, t.ready) for t in q.tenants()] == [("acme", 3, 3), ("globex", 1, 1),
                                                                     ("initech", 1, 1)]
    lines.write_text('{"event_id": "x1", "body": {}, "flow": "fresh", "tenant": "acme"}\n'
                     '{"event_id": "x2", "body": {}, "flow": "acme-1", "tenant": "globex"}\n')
    status, out, err = run(capsys, "--db", db, "enqueue", str(lines))
    assert (status, out) == (1, "")
    assert err.startswith(f"fairq: {lines}: line 2: ") and "tenant" in err and err.count("\n") == 1
    with fairq.Queue(db) as q:
        assert q.get("x1") is None and q.get("x2") is None


# -- against a server ------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A server on a fresh file in its own folder; yields its URL."""
    (tmp_path / "server").mkdir()
    with fairq.Queue(tmp_path / "server" / "served.db") as queue, running(queue, token=TOKEN) as server:
        yield server.url


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`fairq ARGS` (fairq.cli.main in this process) in `cwd`, with the test token and no
    FAIRQ_DB / FAIRQ_URL unless given."""
    return run_cli(*args, cwd=cwd, env={"FAIRQ_TOKEN": TOKEN, **env}, unset=("FAIRQ_DB", "FAIRQ_URL", "FAIRQ_TOKEN"))


def test_set_tenant_and_tenants_against_a_server_work_on_the_servers_queue(served, tmp_path) -> None:
    client = fairq.Client(served, token=TOKEN, timeout=HANG)
    client.enqueue_many([("a1", {}, "acme-1", "acme"), ("a2", {}, "acme-2", "acme")])
    done = cli("--url", served, "set-tenant", "acme", "--max-inflight", "1", "--reason", "cap it", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["max_inflight"] == 1
    assert client.claim(owner="w1") is not None
    assert client.claim(owner="w2") is None  # the cap holds on the server
    done = fairq_cli("tenants", cwd=tmp_path, env={"FAIRQ_URL": served, "FAIRQ_TOKEN": TOKEN})  # a real process
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[1].split()[:9] == ["acme", "1", "1", "-", "1", "1", "2", "-", "max_inflight"]
    done = cli("--url", served, "explain", "acme-2", cwd=tmp_path)
    assert done.returncode == 0 and "waits for its tenant 'acme'" in done.stdout
    assert [row.reason for row in client.audit() if row.action == "set_tenant"] == ["cap it"]
    assert not list(tmp_path.glob("fairq.db*"))


def test_a_server_refuses_a_bad_setting_in_one_line_with_exit_1(served, tmp_path) -> None:
    done = cli("--url", served, "set-tenant", "acme", "--weight", "0", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("fairq: ") and "weight" in done.stderr and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert fairq.Client(served, token=TOKEN, timeout=HANG).tenants() == []
