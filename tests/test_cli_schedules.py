"""`fairq tick` and `fairq schedules ...`: exit codes and output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import fairq
from helpers import cli

def fairq_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`fairq --db q.db ARGS` in `cwd`, called in this process."""
    return cli("--db", "q.db", *args, cwd=cwd)


def test_a_schedule_is_added_listed_ticked_paused_resumed_and_removed(tmp_path) -> None:
    done = fairq_cli("schedules", "add", "report", "--every", "10", "--start", "20", "--body", '{"to": "ops"}',
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("report  every 10s  misfire coalesce  flow report  next 1970-01-01T00:00:20Z")
    again = fairq_cli("schedules", "add", "report", "--every", "10", "--start", "20", "--body", '{"to": "ops"}',
                      cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == done.stdout

    ticked = fairq_cli("tick", "--now", "50", cwd=tmp_path)
    assert ticked.returncode == 0, ticked.stderr
    assert ticked.stdout.splitlines() == ["created report@1970-01-01T00:00:50Z", "1 instances created"]

    assert "PAUSED" in fairq_cli("schedules", "pause", "report", cwd=tmp_path).stdout
    assert json.loads(fairq_cli("tick", "--now", "70", "--json", cwd=tmp_path).stdout) == []
    assert "PAUSED" not in fairq_cli("schedules", "resume", "report", cwd=tmp_path).stdout
    assert json.loads(fairq_cli("tick", "--now", "70", "--json", cwd=tmp_path).stdout) == [
        {"event_id": "report@1970-01-01T00:01:10Z", "flow": "report", "seq": 2, "created": True}]

    listed = json.loads(fairq_cli("schedules", "list", "--json", cwd=tmp_path).stdout)
    assert [(s["name"], s["next_slot_utc"], s["body"]) for s in listed] == [
        ("report", "1970-01-01T00:01:20Z", {"to": "ops"})]

    assert fairq_cli("schedules", "remove", "report", cwd=tmp_path).stdout == "removed report\n"
    gone = fairq_cli("schedules", "remove", "report", cwd=tmp_path)
    assert gone.returncode == 1 and "no schedule is called 'report'" in gone.stderr
    with fairq.Queue(tmp_path / "q.db") as q:
        assert [a.event_id[-9:-1] for a in q.audit() if a.action == "misfire"] == [
            "00:00:20", "00:00:30", "00:00:40", "00:01:00"]


def test_a_cron_schedule_in_a_time_zone_shows_its_next_slot_in_utc(tmp_path) -> None:
    done = fairq_cli("schedules", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
                     "--start", "1774735200", "--misfire", "skip", "--grace", "60", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["next_slot_utc"], shown["misfire"], shown["grace"]) == ("2026-03-29T01:00:00Z", "skip", 60.0)


def test_refused_input_exits_1_naming_the_field(tmp_path) -> None:
    for args, message in [
        (("--cron", "61 * * * *"), "cron.minute: 61 is out of range 0-59"),
        (("--every", "10", "--body", "NaN"), "body: NaN is not JSON"),
        (("--every", "10", "--body", "{"), "body: is not JSON"),
        (("--every", "10", "--misfire", "skip"), "grace: is required"),
        (("--cron", "@daily", "--tz", "Mars/Olympus"), "tz: 'Mars/Olympus' is not a known IANA time zone"),
        (("--every", "nan"), "every: must be a finite number of seconds"),
    ]:
        done = fairq_cli("schedules", "add", "x", *args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    with fairq.Queue(tmp_path / "q.db") as q:
        assert q.schedules.list() == []


def test_usage_errors_exit_2(tmp_path) -> None:
    assert fairq_cli("schedules", cwd=tmp_path).returncode == 2
    assert fairq_cli("schedules", "add", "x", cwd=tmp_path).returncode == 2  # neither --every nor --cron
    assert fairq_cli("schedules", "add", "x", "--every", "1", "--cron", "@daily", cwd=tmp_path).returncode == 2
    assert fairq_cli("schedules", "add", "x", "--every", "1", "--flow", "f", "--overlap",
                     cwd=tmp_path).returncode == 2
    assert fairq_cli("schedules", "add", "x", "--every", "1", "--misfire", "later", cwd=tmp_path).returncode == 2


def test_tick_and_list_refuse_a_missing_database(tmp_path) -> None:
    for args in (("tick",), ("schedules", "list"), ("schedules", "pause", "x")):
        done = fairq_cli(*args, cwd=tmp_path)
        assert done.returncode == 1 and "no fairq database" in done.stderr
    assert not (tmp_path / "q.db").exists()


def test_a_body_with_a_duplicate_key_is_refused(tmp_path) -> None:
    done = fairq_cli("schedules", "add", "x", "--every", "10", "--body", '{"a": 1, "a": 2}', cwd=tmp_path)
    assert done.returncode == 1
    assert "body.a: is a duplicate key" in done.stderr
