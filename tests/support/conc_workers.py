"""Worker functions for the concurrency tests (importable by spawned processes)."""

from __future__ import annotations

import fairq


def race_one_claim(path: str, barrier, results) -> None:
    q = fairq.Queue(path, busy_timeout=30)
    barrier.wait()
    lease = q.claim(owner="racer", now=0, lease_seconds=60)
    results.put(None if lease is None else lease.event_id)
    q.close()


def drain(path: str, name: str, barrier, results, stop_after_idle: int = 3) -> None:
    """Claim and ack until the queue stays idle; report claims and any order violation."""
    q = fairq.Queue(path, busy_timeout=30)
    barrier.wait()
    claimed: list[tuple[str, int]] = []
    violations: list[str] = []
    idle = 0
    while idle < stop_after_idle:
        leases = q.claim_many(4, owner=name, lease_seconds=60)
        if not leases:
            idle += 1
            continue
        idle = 0
        for lease in leases:
            claimed.append((lease.event_id, lease.generation))
            if lease.flow is not None and lease.seq > 1:
                before = q.events(flow=lease.flow, limit=lease.seq - 1)
                if any(e.state is not fairq.State.ACKED for e in before):
                    violations.append(f"{lease.event_id} claimed past an unacked head")
        results_settled = q.settle_many([(lease, "ack") for lease in leases])
        for r in results_settled:
            if not isinstance(r, fairq.Settled):
                violations.append(f"lost lease: {r}")
    results.put((name, claimed, violations))
    q.close()


def open_fresh(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        with fairq.Queue(path, busy_timeout=30) as q:
            q.enqueue(f"opened-{id(q)}", {}, flow="F")
        results.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(f"{type(exc).__name__}: {exc}")
