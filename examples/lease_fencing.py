"""A fenced timeline: a periodic report, a worker that stalls, a fenced completion.

A schedule `report` has slots at 10 and 20 (every 10 s from 10); leases last
5 s. Worker A claims slot 10 and stalls; worker B reclaims it when A's lease
ends and completes it; A's late completion changes nothing. The result table
lives in the same file and is written by the settle effect, so a result and
its completion commit together: it ends with exactly one result for slot 10.
Then a second file shows catch-up after downtime: missed slots 20, 30, 40, 50
coalesce into 50, and 20, 30, 40 are recorded as misfires.

    python examples/lease_fencing.py            # print the timeline
    python examples/lease_fencing.py --check    # and exit 1 on any difference from EXPECTED

Times are logical seconds (Unix time, so slot 10 is 1970-01-01T00:00:10Z)
passed as `now=`, so every run prints the same.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import fairq

LEASE = 5  # seconds

# (time, who, what, result) for every step, in order.
EXPECTED: list[list[Any]] = [
    [9, "scheduler", "tick ahead 11 s", {"created": ["report@1970-01-01T00:00:10Z", "report@1970-01-01T00:00:20Z"]}],
    [9, "worker-a", "claim", {"claimed": None}],
    [10, "worker-a", "claim", {"claimed": "report@1970-01-01T00:00:10Z", "generation": 1, "lease_until": 15.0}],
    [14, "worker-b", "claim", {"claimed": None}],
    [15, "worker-b", "claim", {"claimed": "report@1970-01-01T00:00:10Z", "generation": 2, "lease_until": 20.0}],
    [16, "worker-a", "complete generation 1", {"refused": "StaleLease", "results": 0}],
    [16, "worker-b", "complete generation 2", {"state": "acked", "results": 1}],
    [16, "worker-b", "complete generation 2 again", {"refused": "StaleLease", "results": 1}],
    [16, "reader", "result table", {"rows": [["report", "1970-01-01T00:00:10Z", "output from worker-b"]]}],
    [19, "worker-b", "claim", {"claimed": None}],
    [20, "worker-b", "claim", {"claimed": "report@1970-01-01T00:00:20Z", "generation": 1, "lease_until": 25.0}],
    [50, "scheduler", "tick after downtime (coalesce)", {"created": ["report@1970-01-01T00:00:50Z"]}],
    [50, "reader", "misfires", {"slots": ["report@1970-01-01T00:00:20Z", "report@1970-01-01T00:00:30Z",
                                          "report@1970-01-01T00:00:40Z"],
                                "reason": "coalesce: a later slot (1970-01-01T00:00:50Z) was due"}],
]


def claim(q: fairq.Queue, owner: str, now: float) -> tuple[fairq.Lease | None, dict[str, Any]]:
    lease = q.claim(owner=owner, now=now)
    if lease is None:
        return None, {"claimed": None}
    return lease, {"claimed": lease.event_id, "generation": lease.generation, "lease_until": lease.lease_until}


def complete(q: fairq.Queue, lease: fairq.Lease, owner: str, now: float, results: Path) -> dict[str, Any]:
    """Ack with the result written in the same transaction, keyed by (task, slot)."""
    def write_result(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO result (task, slot, output) VALUES (:task, :slot, :output)",
                     {"task": lease.body["schedule"], "slot": lease.body["slot"],
                      "output": f"output from {owner}"})
    try:
        settled = q.ack(lease, effect=write_result, now=now)
        outcome: dict[str, Any] = {"state": settled.state.value}
    except fairq.LeaseLost as lost:
        outcome = {"refused": type(lost).__name__}
    outcome["results"] = len(result_rows(results))
    return outcome


def result_rows(path: Path) -> list[list[str]]:
    conn = sqlite3.connect(path)
    try:
        return [list(r) for r in conn.execute("SELECT task, slot, output FROM result ORDER BY task, slot")]
    finally:
        conn.close()


def fencing(directory: Path) -> list[list[Any]]:
    """Slots 10 and 20, worker A stalls on 10, worker B takes over."""
    path = directory / "queue.db"
    steps: list[list[Any]] = []
    with fairq.Queue(path, lease_seconds=LEASE, max_attempts=3) as q:
        conn = sqlite3.connect(path)
        with conn:
            # The application's result table, one row per (task, slot) at most.
            conn.execute("CREATE TABLE result (task TEXT NOT NULL, slot TEXT NOT NULL, output TEXT NOT NULL, "
                         "PRIMARY KEY (task, slot))")
        conn.close()
        q.schedules.add("report", every=10, start=10)
        created = q.tick(now=9, ahead=11)
        steps.append([9, "scheduler", "tick ahead 11 s", {"created": [e.event_id for e in created]}])
        steps.append([9, "worker-a", "claim", claim(q, "worker-a", 9)[1]])
        lease_a, seen = claim(q, "worker-a", 10)
        steps.append([10, "worker-a", "claim", seen])
        # t=11: worker-a stops responding; its lease runs until 15.
        steps.append([14, "worker-b", "claim", claim(q, "worker-b", 14)[1]])
        lease_b, seen = claim(q, "worker-b", 15)
        steps.append([15, "worker-b", "claim", seen])
        assert lease_a is not None and lease_b is not None
        steps.append([16, "worker-a", "complete generation 1", complete(q, lease_a, "worker-a", 16, path)])
        steps.append([16, "worker-b", "complete generation 2", complete(q, lease_b, "worker-b", 16, path)])
        steps.append([16, "worker-b", "complete generation 2 again", complete(q, lease_b, "worker-b", 16, path)])
        steps.append([16, "reader", "result table", {"rows": result_rows(path)}])
        steps.append([19, "worker-b", "claim", claim(q, "worker-b", 19)[1]])
        steps.append([20, "worker-b", "claim", claim(q, "worker-b", 20)[1]])
    return steps


def catch_up(directory: Path) -> list[list[Any]]:
    """Slots 20, 30, 40, 50 all pass while nothing ticks; coalesce runs only 50."""
    with fairq.Queue(directory / "catch_up.db", lease_seconds=LEASE) as q:
        q.schedules.add("report", every=10, start=20, misfire="coalesce")
        created = q.tick(now=50)
        missed = [a for a in q.audit() if a.action == "misfire"]
    reasons = sorted({a.reason for a in missed})
    return [
        [50, "scheduler", "tick after downtime (coalesce)", {"created": [e.event_id for e in created]}],
        [50, "reader", "misfires", {"slots": [a.event_id for a in missed],
                                    "reason": reasons[0] if len(reasons) == 1 else reasons}],
    ]


def run() -> list[list[Any]]:
    with tempfile.TemporaryDirectory(prefix="lease-fencing-") as directory:
        steps = fencing(Path(directory)) + catch_up(Path(directory))
    return json.loads(json.dumps(steps))  # tuples become lists, as in EXPECTED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if any step differs from EXPECTED")
    args = parser.parse_args(argv)
    steps = run()
    differences = 0
    for i in range(max(len(steps), len(EXPECTED))):
        got = steps[i] if i < len(steps) else None
        want = EXPECTED[i] if i < len(EXPECTED) else None
        ok = got == want
        differences += not ok
        if got is None:
            print("DIFF the timeline ended early")
        else:
            t, who, what, result = got
            print(f"{'ok  ' if ok else 'DIFF'} t={t:<3} {who:<9} {what}: {json.dumps(result)}")
        if not ok:
            print(f"     expected: {json.dumps(want)}")
    print(f"{len(EXPECTED) - differences}/{len(EXPECTED)} steps as expected")
    return 1 if args.check and differences else 0


if __name__ == "__main__":
    sys.exit(main())
