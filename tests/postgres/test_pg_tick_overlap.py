"""Two tickers that overlap decide each slot once: the second waits for the
first's schedule rows and resumes from where the first left them.

Interleaved deterministically: ticker A stops right after reading its due
schedules (a hook); ticker B then ticks in another thread, and A goes on
only once B is waiting for A's row lock (or B has finished)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import fairq
from fairq.postgres.schedules import PgSchedules
from pgcluster import require_psycopg

psycopg = require_psycopg()


def waiting_for_a_lock(url: str, application_name: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                                 "AND wait_event_type = 'Lock'", (application_name,)).fetchone()[0])


def test_a_tick_overlapping_another_decides_no_slot_twice(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with fairq.Queue(pg_url) as setup:
        now = setup.stats().now
        setup.schedules.add("s", every=1, start=now - 20, misfire="skip", grace=5.5)
    a = fairq.Queue(f"{pg_url}&application_name=ticker-a")
    b = fairq.Queue(f"{pg_url}&application_name=ticker-b")
    paused, go = threading.Event(), threading.Event()
    real = PgSchedules.due

    def due(self: PgSchedules, horizon_ms: int) -> Any:
        found = real(self, horizon_ms)
        if threading.current_thread().name == "ticker-a":
            paused.set()
            go.wait(60)  # only stops a hang
        return found

    monkeypatch.setattr(PgSchedules, "due", due)
    made: dict[str, list[fairq.Enqueued]] = {}
    ta = threading.Thread(target=lambda: made.__setitem__("a", a.tick()), name="ticker-a")
    tb = threading.Thread(target=lambda: made.__setitem__("b", b.tick()), name="ticker-b")
    try:
        ta.start()
        assert paused.wait(60)
        tb.start()
        deadline = time.monotonic() + 60  # only stops a hang
        while tb.is_alive() and not waiting_for_a_lock(pg_url, "ticker-b") and time.monotonic() < deadline:
            time.sleep(0.01)
        go.set()
        ta.join(60)
        tb.join(60)
    finally:
        go.set()
        a.close()
        b.close()
    assert [e.event_id for e in made["b"] if e.created] == []  # B found every slot decided
    with fairq.Queue(pg_url) as q:
        misfires = [entry.event_id for entry in q.audit() if entry.action == "misfire"]
        assert len(misfires) == len(set(misfires)) >= 1  # the skipped slots, audited once
        assert len(q.events(limit=100)) == len([e for e in made["a"] if e.created]) > 0
