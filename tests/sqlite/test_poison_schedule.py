"""A stored schedule body this process cannot decode stops only its own
schedule: its due slots become misfires saying why, other schedules and every
event go on, and reads show the body as an UndecodableBody."""

from __future__ import annotations

import sqlite3
import sys

import fairq
from fairq.types import UndecodableBody

HUGE = "1" * 5000  # more digits than Python's default int-digit limit (4300)


def _poison(path, name: str) -> None:
    """Write a body an old fairq (or a process without the limit) could have stored."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE schedule SET body = :body WHERE name = :name", {"body": f'{{"n": {HUGE}}}', "name": name})
    conn.close()


def test_a_schedule_with_an_undecodable_body_misfires_alone_and_the_rest_goes_on(tmp_path) -> None:
    assert sys.get_int_max_str_digits() and sys.get_int_max_str_digits() < len(HUGE)
    path = tmp_path / "q.db"
    with fairq.Queue(path, clock=lambda: 0.0) as q:
        q.schedules.add("bad", every=10, start=0, body={"n": 1}, misfire="all")
        q.schedules.add("good", every=10, start=0, body={"n": 2}, misfire="all")
        q.enqueue("e1", {"n": 3}, flow="f")
    _poison(path, "bad")
    with fairq.Queue(path, clock=lambda: 0.0) as q:
        made = q.tick(now=25)
        assert sorted(e.event_id.split("@")[0] for e in made) == ["good"] * 3
        misfires = [a for a in q.audit() if a.action == "misfire"]
        assert len(misfires) == 3 and all(a.reason == "undecodable_body" for a in misfires)
        assert all("bad" in a.event_id for a in misfires)
        [bad] = [s for s in q.schedules.list() if s.name == "bad"]
        assert isinstance(bad.body, UndecodableBody)
        assert q.schedules.pause("bad").paused
        assert q.claim(now=25) is not None  # events are still served


def test_a_ticking_worker_goes_on_working_events_when_a_tick_fails(tmp_path, caplog) -> None:
    path = tmp_path / "q.db"
    with fairq.Queue(path) as q:
        q.enqueue_many([(f"e{i}", {}, "f") for i in range(3)])
        q.tick = lambda **kw: (_ for _ in ()).throw(fairq.Busy("database is locked"))  # type: ignore[method-assign]
        done = fairq.Worker(q, lambda job: None, tick=True).run(until_idle=True, signals=False)
        assert done["acked"] == 3
    assert any("schedules.tick_failed" in r.getMessage() for r in caplog.records)
