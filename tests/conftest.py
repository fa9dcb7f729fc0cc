"""Shared fixtures: queues on real files in tmp_path, and the invariant check."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fairq

# The seed's settings: 3 claims per round, backoff 2 then 4 (cap 8), no jitter,
# a lease of 5 logical seconds.
SEED_BACKOFF = fairq.Backoff(base=2.0, factor=2.0, cap=8.0, jitter=False)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


@pytest.fixture
def make_queue(db_path: Path) -> Iterator[Callable[..., fairq.Queue]]:
    opened: list[fairq.Queue] = []

    def make(**kw: object) -> fairq.Queue:
        kw.setdefault("lease_seconds", 5)
        kw.setdefault("max_attempts", 3)
        kw.setdefault("backoff", SEED_BACKOFF)
        q = fairq.Queue(db_path, **kw)  # type: ignore[arg-type]
        opened.append(q)
        return q

    yield make
    for q in opened:
        try:
            q.close()
        except Exception:
            pass
    check_invariants(db_path)


@pytest.fixture
def q(make_queue: Callable[..., fairq.Queue]) -> fairq.Queue:
    return make_queue()


def check_invariants(path: Path) -> None:
    """The incremental bookkeeping equals what a full recount derives."""
    if not path.exists():
        return
    conn = sqlite3.connect(path)
    try:
        # Every flow's head is its lowest unacked seq.
        rows = conn.execute(
            "SELECT f.flow_id, f.head_id, "
            " (SELECT e.id FROM event e WHERE e.flow_id = f.flow_id AND e.state != 'acked' "
            "  ORDER BY e.seq LIMIT 1) FROM flow f"
        ).fetchall()
        for flow_id, head_id, expected in rows:
            assert head_id == expected, f"flow {flow_id}: head {head_id}, expected {expected}"
        # due_ms follows the head's state.
        rows = conn.execute(
            "SELECT f.flow_id, f.due_ms, f.runnable, e.state, e.next_at_ms, e.lease_until_ms "
            "FROM flow f JOIN event e ON e.id = f.head_id"
        ).fetchall()
        for flow_id, due, runnable, state, next_at, lease_until in rows:
            want = {"ready": next_at, "inflight": lease_until, "quarantined": None}[state]
            assert due == want, f"flow {flow_id}: due {due}, head {state} wants {want}"
            if runnable:
                now = conn.execute("SELECT now_ms FROM clock").fetchone()[0]
                assert due <= now, f"flow {flow_id} runnable before it is due"
        # Seqs have no gaps and the tally matches a recount.
        gaps = conn.execute(
            "SELECT flow_id FROM event GROUP BY flow_id HAVING max(seq) != count(*)"
        ).fetchall()
        assert not gaps, f"flows with seq gaps: {gaps}"
        actual = dict(conn.execute("SELECT state, count(*) FROM event GROUP BY state"))
        tally = dict(conn.execute("SELECT state, n FROM tally"))
        for state, n in tally.items():
            assert n == actual.get(state, 0), f"tally {state}={n}, counted {actual.get(state, 0)}"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def drain_order(q: fairq.Queue, *, now: float, limit: int = 1000) -> list[str]:
    """Claim and ack until idle; the event ids in claim order."""
    order = []
    for _ in range(limit):
        lease = q.claim(now=now)
        if lease is None:
            break
        order.append(lease.event_id)
        q.ack(lease, now=now)
    return order
