"""Every `fairq` command with `--db postgresql://...`, and an unreachable server."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import fairq
import fairq.cli
from helpers import start_serve

HANG = 60  # seconds; only to stop a hung test
#: Nothing listens on port 1 of the loopback address.
UNREACHABLE = "postgresql://fairq:secret@127.0.0.1:1/nowhere"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = fairq.cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def tables(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()
    return int(row[0]) if row else 0


def test_every_command_works_on_a_postgresql_url(pg_url: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = ("--db", pg_url)
    assert run(capsys, *db, "init")[0] == 0
    lines = tmp_path / "events.jsonl"
    lines.write_text("".join(json.dumps({"event_id": f"e{i}", "flow": "F" if i < 3 else "G", "body": {"n": i}}) + "\n"
                             for i in range(5)))
    status, out, _ = run(capsys, *db, "enqueue", str(lines))
    assert status == 0 and json.loads(out) == {"lines": 5, "created": 5, "duplicates": 0}
    status, out, _ = run(capsys, "status", "--json", *db)
    assert status == 0 and json.loads(out)["counts"]["ready"] == 5
    status, out, _ = run(capsys, *db, "events", "--json")
    assert status == 0 and len(json.loads(out)) == 5
    assert run(capsys, *db, "show", "e0")[0] == 0
    status, out, _ = run(capsys, *db, "explain", "G")
    assert status == 0 and out
    status, out, _ = run(capsys, *db, "set-weight", "G", "3", "--json")
    assert status == 0 and json.loads(out)["weight"] == 3
    assert "fairq_events" in run(capsys, *db, "metrics")[1]
    status, out, _ = run(capsys, *db, "policy", "set", "--max-attempts", "1", "--reason", "fail fast")
    assert status == 0
    status, out, _ = run(capsys, *db, "policy", "show")
    assert status == 0 and json.loads(out)["max_attempts"] == 1
    with fairq.Queue(pg_url) as q:  # one head quarantined, to redrive
        lease = q.claim()
        assert lease is not None
        q.fail(lease, "broken")
    status, out, _ = run(capsys, *db, "redrive", lease.event_id, "--expected-generation", str(lease.generation),
                         "--reason", "fixed")
    assert status == 0 and json.loads(out)["generation"] == lease.generation + 1
    status, out, _ = run(capsys, *db, "schedules", "add", "nightly", "--every", "3600", "--json")
    assert status == 0 and json.loads(out)["name"] == "nightly"
    for action in ("pause", "resume"):
        assert run(capsys, *db, "schedules", action, "nightly")[0] == 0
    status, out, _ = run(capsys, *db, "schedules", "list", "--json")
    assert status == 0 and [s["name"] for s in json.loads(out)] == ["nightly"]
    assert run(capsys, *db, "tick")[0] == 0
    assert run(capsys, *db, "schedules", "remove", "nightly")[0] == 0
    status, _, err = run(capsys, *db, "work", "work_handlers:steady", "--until-idle", "--no-tick")
    assert status == 0, err
    with fairq.Queue(pg_url) as q:
        assert q.stats(top=0).counts["ready"] == 0
    status, out, err = run(capsys, *db, "purge", "--older-than", "0")
    assert status == 0, err
    status, _, err = run(capsys, *db, "clock", "reset", "--to", "0", "--reason", "test")
    assert status in (0, 1) and err.count("\n") <= 1  # refused on the server's clock, with one line


def test_a_looking_command_on_a_database_without_a_queue_is_refused_and_creates_nothing(
        pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (("status",), ("events",), ("enqueue", "-"), ("policy", "show"), ("schedules", "list")):
        status, out, err = run(capsys, "--db", pg_url, *argv)
        assert status == 1 and err.startswith("fairq: ") and err.count("\n") == 1, (argv, err)
    assert tables(pg_url) == 0


@pytest.mark.parametrize("argv", [("status",), ("init",), ("enqueue", "-"), ("work", "work_handlers:steady"),
                                  ("policy", "show"), ("schedules", "list"), ("tick",)])
def test_an_unreachable_server_is_one_line_and_exit_1_without_the_password(
        capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    status, out, err = run(capsys, "--db", UNREACHABLE, *argv)
    assert status == 1
    assert err.startswith("fairq: ") and "secret" not in err
    assert err.strip().count("\n") == 0 if argv[0] != "work" else "fairq: " in err


def test_fairq_serve_on_postgresql_serves_a_client(pg_url: str) -> None:
    fairq.Queue(pg_url).close()
    proc, url = start_serve(pg_url, "--port", "0", "--no-auth", "--no-tick")  # type: ignore[arg-type]
    try:
        client = fairq.Client(url, token=None)
        client.enqueue("remote", {"x": 1}, flow="R")
        lease = client.claim()
        assert lease is not None and lease.event_id == "remote"
        assert client.ack(lease).state is fairq.State.ACKED
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    with fairq.Queue(pg_url) as q:
        assert q.get("remote").state is fairq.State.ACKED


def test_serve_names_the_database_without_its_password(pg_url: str) -> None:
    import urllib.parse

    parts = urllib.parse.urlsplit(pg_url)
    with_password = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:hunter2@{parts.hostname}:{parts.port}"))
    fairq.Queue(pg_url).close()
    proc, url = start_serve(with_password, "--port", "0", "--no-auth", "--no-tick")  # type: ignore[arg-type]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG)
    assert "hunter2" not in out + err and url.startswith("http://")


def test_the_command_line_reads_a_postgresql_url_from_fairq_db(pg_url: str, tmp_path: Path) -> None:
    fairq.Queue(pg_url).close()
    import os
    import sys

    env = {**os.environ, "FAIRQ_DB": pg_url, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "fairq", "status", "--json"], env=env, capture_output=True,
                          text=True, timeout=HANG, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["ready"] == 0
    assert list(tmp_path.iterdir()) == []  # no file named after the URL
