"""Many processes on one PostgreSQL queue: one lock order everywhere (flow,
then head, then event) means no deadlock, whatever the mix of verbs; the
bookkeeping recounts exactly afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import fairq
from helpers import ROOT, SUPPORT
from pgcheck import check_pg_invariants
from pgcluster import require_psycopg

psycopg = require_psycopg()

SRC = str(ROOT / "src")


def server_deadlocks(url: str) -> int:
    """The server's count of deadlocks detected in this database (SQLSTATE 40P01)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return int(conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
                   .fetchone()[0])


def test_eight_processes_running_every_verb_meet_no_deadlock(pg_url: str) -> None:
    fairq.Queue(pg_url, lease_seconds=0.05, max_attempts=4).close()  # created once, short leases
    before = server_deadlocks(pg_url)
    procs = [subprocess.Popen([sys.executable, str(SUPPORT / "pg_mixed.py"), pg_url, str(seed), "300"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": SRC})
             for seed in range(8)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)  # only stops a hang
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert sum(r["deadlocks"] for r in reports) == 0, reports
    assert server_deadlocks(pg_url) == before
    assert all(r["n_errors"] == 0 for r in reports), reports
    assert sum(r["calls"] for r in reports) == 8 * 300
    check_pg_invariants(pg_url)
    with fairq.Queue(pg_url) as q:
        stats = q.stats()
        assert stats.totals["enqueued"] == sum(stats.counts.values()) > 0

