"""Whose clock a PostgreSQL queue runs at: by default the database server's
(hosts with skewed clocks agree on lease ends; an explicit time is refused),
or with clock="model" a stored clock exactly as on SQLite."""

from __future__ import annotations

import pytest

import fairq
from pgcluster import require_psycopg

psycopg = require_psycopg()


def server_ms(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()[0])


def test_by_default_leases_end_by_the_servers_clock_whatever_the_hosts_clock_says(pg_url: str) -> None:
    # The host's own clock is a day off; with the server clock it plays no part.
    with fairq.Queue(pg_url, lease_seconds=30) as q:
        q.enqueue("e", {})
        before = server_ms(pg_url)
        lease = q.claim()
        after = server_ms(pg_url)
    assert lease is not None
    assert before + 30_000 <= round(lease.lease_until * 1000) <= after + 30_000


@pytest.mark.parametrize("call", [
    lambda q: q.enqueue("e", {}, now=5),
    lambda q: q.claim(now=5),
    lambda q: q.stats(now=5),
    lambda q: q.tick(now=5),
])
def test_an_explicit_time_on_the_server_clock_is_refused_saying_how_to_give_one(pg_url: str, call) -> None:
    with fairq.Queue(pg_url) as q:
        with pytest.raises(fairq.InvalidInput, match="clock='model'") as info:
            call(q)
        assert info.value.field == "now"
        assert q.get("e") is None and q.stats().totals["enqueued"] == 0


def test_the_model_clock_takes_explicit_times_and_refuses_one_that_goes_back(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue("e", {}, now=100)
        lease = q.claim(now=100, lease_seconds=5)
        assert lease is not None and lease.lease_until == 105
        with pytest.raises(fairq.ClockError):
            q.claim(now=50)
        assert q.claim(now=104) is None and q.claim(now=105).event_id == "e"


def test_a_callable_clock_is_a_model_clock_and_can_be_reset(pg_url: str) -> None:
    wall = [1_000.0]
    with fairq.Queue(pg_url, clock=lambda: wall[0]) as q:
        q.enqueue("e", {}, delay=60)
        wall[0] = 500.0  # the host clock stepped back: calls wait for the stored clock
        done = q.reset_clock(reason="clock was ahead")
        assert (done.before, done.after, done.waits) == (1_000.0, 500.0, 1)
        assert q.get("e").next_at == 560.0


def test_a_clock_reset_on_the_server_clock_is_refused(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        with pytest.raises(fairq.UsageError, match="clock='model'"):
            q.reset_clock(reason="nothing to reset")


@pytest.mark.parametrize("clock", ["server", "model"])
def test_on_sqlite_the_clock_names_are_the_system_clock(tmp_path, clock: str) -> None:
    with fairq.Queue(tmp_path / "q.db", clock=clock) as q:
        q.enqueue("e", {}, now=5)  # explicit times work as always
        assert q.claim(now=6).event_id == "e"


def test_an_unknown_clock_name_is_refused(tmp_path) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(tmp_path / "q.db", clock="wall")
    assert info.value.field == "clock"
