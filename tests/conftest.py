"""Shared fixtures: queues on real files in tmp_path, and the invariant check."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fairq

# Small settings that make retries and quarantine quick to reach: 3 claims per round, backoff 2 then 4 (cap 8), no jitter,
# a lease of 5 logical seconds.
SHORT_BACKOFF = fairq.Backoff(base=2.0, factor=2.0, cap=8.0, jitter=False)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


@pytest.fixture
def make_queue(db_path: Path) -> Iterator[Callable[..., fairq.Queue]]:
    opened: list[fairq.Queue] = []

    def make(**kw: object) -> fairq.Queue:
        kw.setdefault("lease_seconds", 5)
        kw.setdefault("max_attempts", 3)
        kw.setdefault("backoff", SHORT_BACKOFF)
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
    """The incrementally kept dispatch state equals what a full recount derives."""
    if not path.exists():
        return
    conn = sqlite3.connect(path)
    try:
        now = conn.execute("SELECT now_ms FROM queue_state").fetchone()[0]
        # Within a flow, acks happen in seq order: the unacked events are a
        # suffix, seqs have no gaps, and next_seq follows the last one. Purge
        # removes a prefix of acked events: their tombstones sit below the
        # first stored seq.
        for flow_id, next_seq in conn.execute("SELECT flow_id, next_seq FROM flow"):
            states = [r[0] for r in conn.execute(
                "SELECT state FROM event WHERE flow_id = ? ORDER BY seq", (flow_id,))]
            seqs = [r[0] for r in conn.execute("SELECT seq FROM event WHERE flow_id = ? ORDER BY seq", (flow_id,))]
            first_stored = next_seq - len(seqs)
            assert seqs == list(range(first_stored, next_seq)), f"flow {flow_id}: seqs {seqs}, next {next_seq}"
            purged = [r[0] for r in conn.execute("SELECT seq FROM tombstone WHERE flow_id = ?", (flow_id,))]
            assert all(seq < first_stored for seq in purged), f"flow {flow_id}: tombstones {purged}"
            first_unacked = next((i for i, st in enumerate(states) if st != "acked"), len(states))
            assert all(st != "acked" for st in states[first_unacked:]), f"flow {flow_id}: {states}"
        # Exactly the heads (lowest unacked seq of each flow; every unacked
        # unordered event) carry a rotation place.
        heads = {r[0] for r in conn.execute(
            "SELECT e.id FROM event e WHERE e.state != 'acked' AND (e.flow_id IS NULL OR NOT EXISTS "
            "(SELECT 1 FROM event p WHERE p.flow_id = e.flow_id AND p.seq < e.seq AND p.state != 'acked'))")}
        placed = {r[0] for r in conn.execute("SELECT id FROM event WHERE pass IS NOT NULL")}
        assert placed == heads, f"heads {sorted(heads)}, placed {sorted(placed)}"
        early = conn.execute("SELECT id FROM event WHERE runnable = 1 AND dispatch_ms > ?", (now,)).fetchall()
        assert not early, f"runnable before due: {early}"
        actual = dict(conn.execute("SELECT state, count(*) FROM event GROUP BY state"))
        kept = dict(zip(("ready", "inflight", "acked", "quarantined"),
                        conn.execute("SELECT ready_n, inflight_n, acked_n, quarantined_n FROM queue_state").fetchone()))
        for state, n in kept.items():
            assert n == actual.get(state, 0), f"count {state}={n}, recounted {actual.get(state, 0)}"
        tombstones = conn.execute("SELECT count(*) FROM tombstone").fetchone()[0]
        assert conn.execute("SELECT tombstones_n FROM retention").fetchone()[0] == tombstones
        both = conn.execute("SELECT count(*) FROM tombstone JOIN event USING (event_id)").fetchone()[0]
        assert both == 0, "an event id is both stored and tombstoned"
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
