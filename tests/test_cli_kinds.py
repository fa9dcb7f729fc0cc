"""fairq enqueue --kind/--max-attempts/--timeout and fairq events --kind."""

from __future__ import annotations

import json
from pathlib import Path

import fairq
from helpers import cli


def test_enqueue_with_a_kind_and_events_listed_by_kind(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    assert cli("--db", db, "init", cwd=tmp_path).returncode == 0
    done = cli("--db", db, "enqueue", "--id", "a", "--body", "{}", "--kind", "email", "--max-attempts", "2",
               "--timeout", "1.5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert cli("--db", db, "enqueue", "--id", "b", "--body", "{}", cwd=tmp_path).returncode == 0
    with fairq.Queue(db) as q:
        info = q.get("a")
        assert (info.kind, info.max_attempts, info.timeout) == ("email", 2, 1.5)
    listed = cli("--db", db, "events", "--kind", "email", "--json", cwd=tmp_path)
    assert [e["event_id"] for e in json.loads(listed.stdout)] == ["a"]
    table = cli("--db", db, "events", cwd=tmp_path).stdout
    assert table.splitlines()[0].split()[:3] == ["EVENT_ID", "FLOW", "KIND"] and "email" in table
    refused = cli("--db", db, "enqueue", "--id", "c", "--body", "{}", "--kind", "", cwd=tmp_path)
    assert refused.returncode != 0 and "kind" in refused.stderr
