"""One process of the tenant concurrency tests (tests/postgres/test_pg_tenant_concurrency.py):
run as a script with (url, seed, seconds, mode); prints a JSON report.

mode "mixed": for `seconds`, enqueue to random flows of random tenants (some
capped, one rate-limited), claim_many, settle (ack, retry, release, fail,
or leave a lease to expire), extend and redrive; counts deadlock errors
(SQLSTATE 40P01) and every other error, and the events each claim got
(exactly-once is judged by the caller from the acks).
mode "capped": claim one event at a time, keep the lease a few ms, ack;
around each lease the process raises and lowers a shared counter of the
tenant's leases (table observed), recording the most it saw.
"""

from __future__ import annotations

import json
import random
import sys
import time

import psycopg

import fairq


def mixed(q: fairq.Queue, rng: random.Random, seconds: float, seed: int) -> dict[str, object]:
    report: dict[str, object] = {"deadlocks": 0, "errors": [], "acked": [], "calls": 0}
    errors: list[str] = report["errors"]  # type: ignore[assignment]
    acked: list[str] = report["acked"]  # type: ignore[assignment]
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        report["calls"] = int(report["calls"]) + 1  # type: ignore[call-overload]
        try:
            kind = rng.random()
            if kind < 0.3:
                batch = []
                for _ in range(rng.randint(1, 5)):
                    n += 1
                    tenant = rng.choice(["big", "capped", "rated", "small", None])
                    flow = None if rng.random() < 0.2 else f"{tenant or 'none'}-f{rng.randint(0, 12)}"
                    batch.append({"event_id": f"s{seed}-{n}", "body": {"n": n}, "flow": flow, "tenant": tenant})
                q.enqueue_many(batch)
            elif kind < 0.9:
                leases = q.claim_many(rng.randint(1, 4), lease_seconds=rng.choice([0.05, 5]))
                for lease in leases:
                    what = rng.random()
                    try:
                        if what < 0.7:
                            q.ack(lease, effect=(lambda conn: None) if rng.random() < 0.2 else None)
                            acked.append(lease.event_id)
                        elif what < 0.8:
                            q.retry(lease, "again", delay=0)
                        elif what < 0.85:
                            q.release(lease)
                        elif what < 0.88:
                            q.fail(lease, "bad")
                        elif what < 0.93:
                            q.extend(lease, 5)
                            q.ack(lease)
                            acked.append(lease.event_id)
                        # else: left to expire
                    except fairq.LeaseLost:
                        pass
            else:
                for event in q.events(state="quarantined", limit=3):
                    try:
                        q.redrive(event.event_id, reason="again", expected_generation=event.generation)
                    except fairq.RedriveRefused:
                        pass
        except fairq.FairqError as exc:
            text = f"{type(exc).__name__}: {exc}"
            if "deadlock" in text.lower() or "40P01" in text:
                report["deadlocks"] = int(report["deadlocks"]) + 1  # type: ignore[call-overload]
            errors.append(text)
    return report


def capped(q: fairq.Queue, url: str, seconds: float) -> dict[str, object]:
    most, claims, idle = 0, 0, 0
    end = time.monotonic() + seconds
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < end and idle < 200:
            lease = q.claim(lease_seconds=30)
            if lease is None:
                idle += 1
                time.sleep(0.005)
                continue
            idle = 0
            claims += 1
            # Raised after the claim committed, lowered before the ack: inside the lease.
            if lease.event_id.startswith("c"):
                now = conn.execute("UPDATE observed SET n = n + 1 RETURNING n").fetchone()[0]
                most = max(most, now)
                time.sleep(0.003)
                conn.execute("UPDATE observed SET n = n - 1")
            q.ack(lease)
    return {"most": most, "claims": claims}


def main() -> None:
    url, seed, seconds, mode = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    with fairq.Queue(url) as q:
        report = mixed(q, random.Random(seed), seconds, seed) if mode == "mixed" else capped(q, url, seconds)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
