"""`fairq set-weight FLOW WEIGHT` on a local file and against a fairq server:
the weight it sets changes who gets claims, bad input is refused and nothing is written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import fairq
from fairq.cli import main

from helpers import HANG, TOKEN, running
from helpers import cli as run_cli


def heavy_claims(q: fairq.Queue | fairq.Client, claims: int = 8) -> int:
    """Enqueue 20 events in each of the flows "heavy" and "light", claim and ack
    `claims` of them, and count how many came from "heavy"."""
    q.enqueue_many([(f"{flow}-{i}", {"i": i}, flow) for i in range(20) for flow in ("heavy", "light")])
    taken = []
    for _ in range(claims):
        lease = q.claim(owner="test")
        assert lease is not None
        taken.append(lease.flow)
        q.ack(lease)
    return taken.count("heavy")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_set_weight_on_a_file_prints_json_and_gives_the_flow_its_share(tmp_path, capsys) -> None:
    db = str(tmp_path / "q.db")
    assert run(capsys, "--db", db, "init")[0] == 0
    status, out, err = run(capsys, "--db", db, "set-weight", "heavy", "3", "--json")
    assert (status, err) == (0, "")
    assert json.loads(out) == {"flow": "heavy", "weight": 3}
    with fairq.Queue(db) as q:
        # Weights 3:1 give "heavy" 6 of 8 claims (within one); equal weights would give it 4.
        assert heavy_claims(q) in (5, 6, 7)


def test_without_a_weight_the_flows_take_equal_turns(tmp_path) -> None:
    # The control for the test above: the share comes from the command, not from the data.
    with fairq.Queue(tmp_path / "q.db") as q:
        assert heavy_claims(q) == 4


@pytest.mark.parametrize(("weight", "field"), [("0", "weight"), ("1001", "weight"), ("-2", "weight")])
def test_a_weight_out_of_range_is_refused_naming_the_field_and_nothing_is_written(
        tmp_path, capsys, weight: str, field: str) -> None:
    db = str(tmp_path / "q.db")
    assert run(capsys, "--db", db, "init")[0] == 0
    status, out, err = run(capsys, "--db", db, "set-weight", "heavy", weight)
    assert (status, out) == (1, "")
    assert err.startswith(f"fairq: {field}: ") and "Traceback" not in err
    with fairq.Queue(db) as q:
        assert heavy_claims(q) == 4


def test_an_empty_flow_name_is_refused_naming_the_field(tmp_path, capsys) -> None:
    db = str(tmp_path / "q.db")
    assert run(capsys, "--db", db, "init")[0] == 0
    status, out, err = run(capsys, "--db", db, "set-weight", "", "2")
    assert (status, out) == (1, "") and err.startswith("fairq: flow: ")


def test_a_weight_that_is_not_a_whole_number_is_a_usage_error(tmp_path, capsys) -> None:
    db = str(tmp_path / "q.db")
    assert run(capsys, "--db", db, "init")[0] == 0
    status, out, err = run(capsys, "--db", db, "set-weight", "heavy", "1.5")
    assert (status, out) == (2, "") and "invalid int value" in err


def test_set_weight_refuses_a_missing_database_and_does_not_create_it(tmp_path, capsys) -> None:
    db = tmp_path / "absent.db"
    status, out, err = run(capsys, "--db", str(db), "set-weight", "heavy", "3")
    assert (status, out) == (1, "") and "no fairq database" in err
    assert not db.exists()


# -- against a server ------------------------------------------------------------------------------
# The server is fairq serve's Server on a thread and each command runs in this process (fairq.cli.main):
# test_http_serve.py starts `fairq serve` as a real process.


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A server on a fresh file in its own folder; yields its URL."""
    (tmp_path / "server").mkdir()
    with fairq.Queue(tmp_path / "server" / "served.db") as queue, running(queue, token=TOKEN) as server:
        yield server.url


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`fairq ARGS` in `cwd` with the test token and no FAIRQ_DB / FAIRQ_URL unless given."""
    return run_cli(*args, cwd=cwd, env={"FAIRQ_TOKEN": TOKEN, **env}, unset=("FAIRQ_DB", "FAIRQ_URL", "FAIRQ_TOKEN"))


def test_set_weight_against_a_server_sets_the_servers_flow_and_creates_no_local_file(served, tmp_path) -> None:
    done = cli("--url", served, "set-weight", "heavy", "3", "--json", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {"flow": "heavy", "weight": 3}
    assert heavy_claims(fairq.Client(served, token=TOKEN, timeout=HANG)) in (5, 6, 7)
    assert not list(tmp_path.glob("fairq.db*"))


def test_set_weight_takes_the_server_from_fairq_url(served, tmp_path) -> None:
    done = cli("set-weight", "heavy", "3", cwd=tmp_path, FAIRQ_URL=served)
    assert done.returncode == 0 and json.loads(done.stdout) == {"flow": "heavy", "weight": 3}
    assert heavy_claims(fairq.Client(served, token=TOKEN, timeout=HANG)) in (5, 6, 7)
    assert not list(tmp_path.glob("fairq.db*"))


def test_a_server_refuses_a_bad_weight_naming_the_field_with_exit_1(served, tmp_path) -> None:
    done = cli("--url", served, "set-weight", "heavy", "0", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("fairq: ") and "weight" in done.stderr and "Traceback" not in done.stderr
    assert heavy_claims(fairq.Client(served, token=TOKEN, timeout=HANG)) == 4


def test_set_weight_with_a_wrong_token_is_refused_with_exit_1(served, tmp_path) -> None:
    done = cli("--url", served, "set-weight", "heavy", "3", cwd=tmp_path, FAIRQ_TOKEN="wrong")
    assert (done.returncode, done.stdout) == (1, "") and "Traceback" not in done.stderr
    assert heavy_claims(fairq.Client(served, token=TOKEN, timeout=HANG)) == 4
