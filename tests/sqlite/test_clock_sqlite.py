"""An idle claim in SQLite commits nothing: another connection sees no new data version."""

from __future__ import annotations

import sqlite3

import fairq


def test_an_idle_claim_commits_nothing_another_connection_sees(q: fairq.Queue, db_path) -> None:
    q.enqueue("x", {}, now=0)
    q.claim(now=0)  # the only event is now leased until 5
    watcher = sqlite3.connect(db_path)
    before = watcher.execute("PRAGMA data_version").fetchone()[0]
    for t in (1, 2, 3):
        assert q.claim(now=t) is None
    # data_version changes when another connection commits a change.
    assert watcher.execute("PRAGMA data_version").fetchone()[0] == before
    assert q.claim(now=5).event_id == "x"  # the expired lease is taken over: that is stored
    assert watcher.execute("PRAGMA data_version").fetchone()[0] != before
    watcher.close()
