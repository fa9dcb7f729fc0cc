"""Worker processes for the tenant tests with many processes (importable by spawned processes).

Each opens its own Queue on the target, waits at the barrier, and reports
what it observed through the results queue.
"""

from __future__ import annotations

import time
from typing import Any

import fairq


def claim_and_ack(target: Any, settings: dict[str, Any], claims: int, barrier: Any, results: Any) -> None:
    """Make `claims` claims, each acked at once; report the tenant of each, in order."""
    q = fairq.Queue(target, **settings)
    try:
        barrier.wait()
        tenants: list[str] = []
        while len(tenants) < claims:
            lease = q.claim(owner="fair", lease_seconds=60)
            if lease is None:
                continue  # another process holds the only claimable heads for a moment
            tenants.append(lease.event_id.split(".")[0])
            q.ack(lease)
        results.put(tenants)
    finally:
        q.close()


def hold_leases(target: Any, settings: dict[str, Any], seconds: float, hold: float, barrier: Any,
                results: Any) -> None:
    """For `seconds`, claim, hold the lease `hold` seconds, ack; report each
    lease's (tenant, held from, held until) on the system's monotonic clock,
    taken inside the lease: after the claim returned, before the ack is sent."""
    q = fairq.Queue(target, **settings)
    try:
        barrier.wait()
        held: list[tuple[str, float, float]] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            lease = q.claim(owner="cap", lease_seconds=60)
            if lease is None:
                time.sleep(0.002)
                continue
            start = time.monotonic()
            time.sleep(hold)
            held.append((lease.event_id.split(".")[0], start, time.monotonic()))
            q.ack(lease)
        results.put(held)
    finally:
        q.close()
