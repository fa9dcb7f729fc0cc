"""Two tickers that overlap decide each slot once: the second waits for the
first's schedule rows and resumes from where the first left them.

Interleaved deterministically: ticker A stops right after reading its due
schedules (a hook); ticker B then ticks in another thread, and A goes on
only once B is waiting for A's row lock (or B has finished)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import fairq
from fairq.stores.postgres.schedules import PgSchedules
from pgsessions import interleave


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
        interleave(ta, tb, paused=paused, go=go, url=pg_url, second_session="ticker-b")
    finally:
        go.set()
        a.close()
        b.close()
    assert [e.event_id for e in made["b"] if e.created] == []  # B found every slot decided
    with fairq.Queue(pg_url) as q:
        misfires = [entry.event_id for entry in q.audit() if entry.action == "misfire"]
        assert len(misfires) == len(set(misfires)) >= 1  # the skipped slots, audited once
        assert len(q.events(limit=100)) == len([e for e in made["a"] if e.created]) > 0
