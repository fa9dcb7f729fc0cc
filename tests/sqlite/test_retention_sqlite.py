"""Retention in SQLite: the migration that adds it only adds, and a purge killed at a chunk's
commit leaves a whole queue that can finish."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import fairq
from fairq.stores.sqlite import schema as migrate
from fairq.stores.sqlite.connection import read_script
from helpers import ROOT, check_invariants


def test_the_retention_step_only_adds(tmp_path) -> None:
    script = read_script(migrate.MIGRATIONS[next(n for n, m in migrate.MIGRATIONS.items() if "retention" in m)])
    verbs = {line.split()[0] for line in re.sub(r"--[^\n]*", "", script).split(";") if line.strip()}
    assert verbs == {"CREATE", "INSERT"}


@pytest.mark.parametrize("point", ["purge.before_commit", "purge.after_commit"])
def test_a_purge_killed_between_chunks_leaves_a_whole_queue_and_can_finish(tmp_path, point) -> None:
    path = tmp_path / "q.db"
    with fairq.Queue(path) as q:
        q.enqueue_many([(f"e{i}", {"i": i}, f"F{i % 4}") for i in range(40)], now=0)
        for _ in range(30):
            q.ack(q.claim(now=1), now=1)
    child = (f"import fairq; fairq.Queue({str(path)!r}).purge(acked_before=2, now=3, chunk=10)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FAIRQ_CRASH_AT": point}
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, timeout=60)
    assert done.returncode == 86, done.stderr  # killed at the first chunk's commit
    check_invariants(path)
    with fairq.Queue(path) as q:
        purged = q.stats(now=3).totals["purged"]
        assert purged == (0 if point == "purge.before_commit" else 10)  # one whole chunk or none
        assert q.purge(acked_before=2, now=3, chunk=10).events == 30 - purged
        assert q.stats(now=3).counts == {"ready": 10, "inflight": 0, "acked": 0, "quarantined": 0, "discarded": 0}
    check_invariants(path)
