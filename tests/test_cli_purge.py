"""`fairq purge`: removes old acked events, keeps tombstones when asked, refuses a bad age."""

from __future__ import annotations

import fairq
from helpers import cli


def test_fairq_purge_removes_old_acked_events(tmp_path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue_many([("a", {}), ("b", {})], now=0)
        q.ack(q.claim(now=0), now=0)
    kept = cli("--db", "q.db", "purge", "--older-than", "36500d", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.startswith("purged 0 acked events")
    done = cli("--db", "q.db", "purge", "--older-than", "1h", "--keep-tombstones", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "purged 1 acked events (tombstones kept); forgot 0 tombstones\n"
    with fairq.Queue(tmp_path / "q.db") as q:
        assert q.get("a") is None and q.get("b").state is fairq.State.READY
        assert not q.enqueue("a", {}).created
    assert cli("--db", "q.db", "purge", "--older-than", "soon", cwd=tmp_path).returncode == 2
