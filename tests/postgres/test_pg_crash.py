"""A process killed inside a PostgreSQL write leaves nothing half done: killed
before COMMIT nothing of the call is stored (the server rolls back the lost
connection's transaction), killed after it everything is."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import fairq
from helpers import ROOT

SRC = str(ROOT / "src")

CHILD = textwrap.dedent("""
    import sys
    import fairq
    q = fairq.Queue(sys.argv[1], clock="model")
    verb, now = sys.argv[2], float(sys.argv[3])
    if verb == "enqueue":
        q.enqueue_many([("a", {}, "F"), ("b", {}, "F"), ("c", {})], now=now)
    elif verb == "claim":
        q.claim_many(2, owner="doomed", now=now)
    else:
        q.settle_many([(lease, "ack") for lease in q.claim_many(2, now=now)], now=now)
""")


def run(url: str, verb: str, crash_at: str, now: float) -> int:
    env = {**os.environ, "PYTHONPATH": SRC}
    env["FAIRQ_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, "-c", CHILD, url, verb, str(now)], env=env, capture_output=True,
                          timeout=60).returncode


@pytest.mark.parametrize("verb", ["enqueue", "claim", "settle"])
def test_a_process_killed_before_commit_stores_nothing_and_after_commit_everything(pg_url: str, verb: str) -> None:
    moved = {"enqueue": "ready", "claim": "inflight", "settle": "acked"}[verb]
    with fairq.Queue(pg_url, clock="model", lease_seconds=30) as q:
        if verb != "enqueue":
            q.enqueue_many([("a", {}, "F"), ("b", {}, "G")], now=0)
    assert run(pg_url, verb, f"{verb}.before_commit", now=1) == 86
    with fairq.Queue(pg_url, clock="model") as q:
        assert q.stats().counts[moved] == 0
        assert q.stats().totals[{"enqueue": "enqueued", "claim": "claimed", "settle": "acked"}[verb]] == 0
    # At 100 the settle child's committed claims have expired: the next child takes them over.
    assert run(pg_url, verb, f"{verb}.after_commit", now=100) == 86
    with fairq.Queue(pg_url, clock="model") as q:
        after = q.stats()
        assert after.counts[moved] == (3 if verb == "enqueue" else 2)
