"""Multi-row verbs lock every row they name in one order (event order), whatever
the order the caller gives: two calls over the same events never deadlock.

On the server clock writers do not take turns on a clock row, so two bulk
redrives really run side by side (on the model clock they would queue on it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fairq
from helpers import ROOT
from pgcluster import require_psycopg

require_psycopg()

SRC = str(ROOT / "src")

CALLER = textwrap.dedent("""
    import json, os, sys, time, types
    import fairq
    verb, url, items, go = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    with fairq.Queue(url) as q:
        q.stats()  # connected
        open(go + "." + str(os.getpid()), "w").close()
        while not os.path.exists(go):   # both processes start their calls together
            time.sleep(0.001)
        try:
            if verb == "redrive_many":
                answers = q.redrive_many(items, reason="bulk")
            else:  # settle_many: ack leases another process also holds a copy of
                leases = [types.SimpleNamespace(event_id=e, generation=g) for e, g in items]
                answers = [a.attempts if isinstance(a, fairq.Settled) else a
                           for a in q.settle_many([(lease, "ack") for lease in leases])]
        except fairq.FairqError as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
            sys.exit(0)
    print(json.dumps({"answers": [a if isinstance(a, int) else str(a) for a in answers]}))
""")


def quarantine(q: fairq.Queue, prefix: str, n: int) -> list[list[object]]:
    """n quarantined heads, one per flow: [[event_id, generation], ...]."""
    q.enqueue_many([(f"{prefix}-{i}", {}, f"{prefix}-{i}-flow") for i in range(n)])
    while leases := q.claim_many(100):
        q.settle_many([(lease, "fail", "poison") for lease in leases])
    return [[f"{prefix}-{i}", q.get(f"{prefix}-{i}").generation] for i in range(n)]


def start_together(verb: str, url: str, orders: list[list[list[object]]], go: Path) -> list[dict[str, object]]:
    children = [subprocess.Popen([sys.executable, "-c", CALLER, verb, url, json.dumps(order), str(go)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONPATH": SRC})
                for order in orders]
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.{child.pid}").exists() for child in children):
        assert time.monotonic() < deadline and all(child.poll() is None for child in children)
        time.sleep(0.005)
    go.touch()
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(json.loads(out))
    return results


def test_two_bulk_redrives_of_the_same_events_in_opposite_orders_both_answer(pg_url: str, tmp_path: Path) -> None:
    n = 300
    with fairq.Queue(pg_url) as q:
        for round_ in range(3):
            items = quarantine(q, f"r{round_}", n)
            first, second = start_together("redrive_many", pg_url, [items, items[::-1]], tmp_path / f"go-{round_}")
            assert "answers" in first and "answers" in second, (first, second)  # neither met a deadlock
            for (event_id, generation), a, b in zip(items, first["answers"], second["answers"][::-1]):
                # Exactly one of the two redrove each event; the other was told it is ready now.
                won = [x for x in (a, b) if isinstance(x, int)]
                lost = [x for x in (a, b) if not isinstance(x, int)]
                assert won == [generation + 1] and len(lost) == 1 and "is ready, not quarantined" in lost[0], \
                    (event_id, a, b)
            assert all(q.get(event_id).state is fairq.State.READY for event_id, _ in items)
            redriven = [e for e in q.audit() if e.action == "redrive" and e.event_id.startswith(f"r{round_}-")]
            assert len(redriven) == n


def test_two_bulk_settles_of_the_same_leases_in_opposite_orders_both_answer(pg_url: str, tmp_path: Path) -> None:
    n = 300
    with fairq.Queue(pg_url) as q:
        for round_ in range(3):
            q.enqueue_many([(f"s{round_}-{i}", {}, f"s{round_}-{i}-flow") for i in range(n)])
            leases = [lease for _ in range(n // 100 + 1) for lease in q.claim_many(100)]
            items = [[lease.event_id, lease.generation] for lease in sorted(leases, key=lambda le: le.event_id)]
            assert len(items) == n
            first, second = start_together("settle_many", pg_url, [items, items[::-1]], tmp_path / f"go-{round_}")
            assert "answers" in first and "answers" in second, (first, second)  # neither met a deadlock
            for (event_id, _), a, b in zip(items, first["answers"], second["answers"][::-1]):
                # Exactly one of the two acked each lease (its first attempt); the other was told
                # its lease is stale.
                won = [x for x in (a, b) if isinstance(x, int)]
                assert won == [1] and sum(isinstance(x, str) for x in (a, b)) == 1, (event_id, a, b)
            assert q.stats().counts["acked"] == n * (round_ + 1)
