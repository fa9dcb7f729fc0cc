"""The policy commands: `fairq policy show` and `fairq policy set` print, change and audit the
stored policy and refuse bad input without a traceback; `fairq work` naming another budget is
refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fairq
from fairq.cli import main

SLOW = fairq.Backoff(base=4.0, factor=3.0, cap=50.0, jitter=False)


def file_bytes(path: Path) -> dict[str, bytes]:
    """The database file and any WAL beside it, byte for byte."""
    return {p.name: p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name)}


def test_policy_show_prints_the_stored_policy(db_path, capsys) -> None:
    fairq.Queue(db_path, max_attempts=4, lease_seconds=9).close()
    assert main(["--db", str(db_path), "policy", "show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == {"max_attempts": 4, "lease_seconds": 9.0, "version": 1,
                     "backoff": {"base": 1.0, "factor": 2.0, "cap": 300.0, "jitter": True}}


def test_policy_set_changes_only_the_fields_given_and_is_audited(db_path, capsys) -> None:
    fairq.Queue(db_path, max_attempts=4, backoff=SLOW).close()
    assert main(["--db", str(db_path), "policy", "set", "--backoff-cap", "20", "--backoff-jitter", "on",
                 "--lease-seconds", "45", "--reason", "shorter waits", "--actor", "alice"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["version"] == 2 and printed["backoff"]["cap"] == 20.0
    with fairq.Queue(db_path) as q:
        assert q.policy() == fairq.Policy(max_attempts=4, lease_seconds=45.0,
                                          backoff=fairq.Backoff(base=4.0, factor=3.0, cap=20.0, jitter=True))
        (row,) = q.audit()
        assert (row.action, row.reason, row.actor) == ("policy_set", "shorter waits", "alice")


@pytest.mark.parametrize("args, message", [
    (["--reason", "why"], "fairq: policy:"),
    (["--max-attempts", "0", "--reason", "why"], "fairq: max_attempts:"),
    (["--backoff-factor", "0.5", "--reason", "why"], "fairq: --backoff-factor:"),
    (["--max-attempts", "2", "--reason", " "], "fairq: reason:"),
])
def test_policy_set_refuses_bad_input_without_a_traceback(db_path, capsys, args, message) -> None:
    fairq.Queue(db_path).close()
    before = file_bytes(db_path)
    assert main(["--db", str(db_path), "policy", "set", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err
    assert file_bytes(db_path) == before


def test_fairq_work_with_a_different_max_attempts_is_refused_naming_the_field(db_path, capsys) -> None:
    fairq.Queue(db_path, max_attempts=3).close()
    assert main(["--db", str(db_path), "work", "json:dumps", "--max-attempts", "7", "--until-idle"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fairq: max_attempts: the queue stores 3, 7 was given")
