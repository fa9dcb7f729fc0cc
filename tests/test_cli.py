"""The fairq command: exit codes, stdout, stderr. The demo runs as a real `python -m fairq`
process; the rest call the same entry point in this process."""

from __future__ import annotations

import json

import fairq
import fairq.cli
from helpers import cli, fairq_cli


def test_demo_tells_the_story_and_exits_0(tmp_path) -> None:
    done = fairq_cli("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "A1: quarantined (unsupported_delta)" in out
    assert "B1: accepted, settled ack" in out
    assert "redrove A1 -> generation 2" in out
    assert "totals: {'A': 11, 'B': 5, 'C': 5}" in out
    assert list(tmp_path.iterdir()) == []  # the temporary databases are gone


def test_demo_can_keep_its_databases(tmp_path) -> None:
    done = cli("demo", "--keep-in", "kept", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with fairq.Queue(tmp_path / "kept" / "queue.db") as q:
        assert q.stats().counts["acked"] == 6
    again = cli("demo", "--keep-in", "kept", cwd=tmp_path)
    assert again.returncode == 1 and "not empty" in again.stderr


def test_status_json_reports_every_state(tmp_path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue("a", {}, flow="F", now=0)
        q.enqueue("b", {}, flow="F", now=0)
        q.fail(q.claim(now=0), "broken", now=0)
    done = cli("--db", "q.db", "status", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["counts"] == {"ready": 1, "inflight": 0, "acked": 0, "quarantined": 1, "discarded": 0}
    assert data["flows"] == 1


def test_status_reads_the_database_from_the_environment(tmp_path) -> None:
    fairq.Queue(tmp_path / "env.db").close()
    done = cli("status", cwd=tmp_path, env={"FAIRQ_DB": str(tmp_path / "env.db")})
    assert done.returncode == 0, done.stderr
    assert "ready" in done.stdout and "quarantined" in done.stdout


def test_status_of_a_missing_database_is_refused_with_exit_1(tmp_path) -> None:
    done = cli("--db", "missing.db", "status", cwd=tmp_path)
    assert done.returncode == 1
    assert "no fairq database at missing.db" in done.stderr
    assert not (tmp_path / "missing.db").exists()


def test_a_foreign_file_is_refused_with_exit_1(tmp_path) -> None:
    (tmp_path / "junk.db").write_text("not sqlite at all" * 50)
    done = cli("--db", "junk.db", "status", cwd=tmp_path)
    assert done.returncode == 1 and "fairq:" in done.stderr


def test_usage_errors_exit_2(tmp_path) -> None:
    assert cli("frobnicate", cwd=tmp_path).returncode == 2
    assert cli(cwd=tmp_path).returncode == 2
    assert cli("status", "--bogus", cwd=tmp_path).returncode == 2


def test_events_says_on_stderr_when_it_cut_the_listing(tmp_path, capsys) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue_many([(f"e{i}", {}) for i in range(5)], now=0)
    assert fairq.cli.main(["--db", str(tmp_path / "q.db"), "events", "--limit", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [e["event_id"] for e in json.loads(out)] == ["e0", "e1"]
    assert err.startswith("fairq: showing 2 of 5 events; use --limit N")
    assert fairq.cli.main(["--db", str(tmp_path / "q.db"), "events", "--limit", "5"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 6 and err == ""
    assert fairq.cli.main(["--db", str(tmp_path / "q.db"), "events", "--flow", "e3", "--limit", "1"]) == 0
    assert capsys.readouterr().err == ""  # the only event of that flow


def test_show_of_a_purged_event_says_only_a_tombstone_remains(tmp_path, capsys) -> None:
    import time

    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue("gone", {}, flow="F")
        q.ack(q.claim())
        assert q.purge(acked_before=time.time() + 1).events == 1
    assert fairq.cli.main(["--db", str(tmp_path / "q.db"), "show", "gone"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fairq: no event 'gone'; if it was purged, only a tombstone of its id remains")
