"""Worker functions for the schedule concurrency tests (importable by spawned processes)."""

from __future__ import annotations

import fairq


def tick_repeatedly(path: str, ticks: int, barrier, results) -> None:
    """Tick on the wall clock `ticks` times; report every instance this process created."""
    q = fairq.Queue(path, busy_timeout=30)
    barrier.wait()
    created: list[str] = []
    for _ in range(ticks):
        created.extend(e.event_id for e in q.tick() if e.created)
    results.put(created)
    q.close()
