"""Waits for results on PostgreSQL: a settle notifies the result channel only for an
event someone waits for (a row in event_result_waiter), and a wait wakes on that
notice, well before its fallback look (RECHECK)."""

from __future__ import annotations

import threading
import time

import fairq
from fairq.api.results import RECHECK
from pgcluster import require_psycopg

psycopg = require_psycopg()


def notices(conn, seconds: float = 0.3) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=seconds)]


def test_an_ack_notifies_only_for_an_event_someone_waits_for(pg_url: str) -> None:
    q = fairq.Queue(pg_url)
    listener = psycopg.connect(pg_url, autocommit=True)
    try:
        listener.execute("LISTEN fairq_result")
        q.enqueue_many([("plain", {}), ("watched", {}), ("failed", {})])
        leases = {lease.event_id: lease for lease in q.claim_many(3)}
        q.ack(leases["plain"])
        assert notices(listener) == []  # nobody waits: no NOTIFY
        listener.execute("INSERT INTO event_result_waiter (event_id, token) VALUES ('watched', 't'), "
                         "('failed', 'u')")
        q.ack(leases["watched"], result=[1])
        q.fail(leases["failed"], "no")
        assert sorted(notices(listener)) == ["failed", "watched"]
    finally:
        listener.close()
        q.close()


def test_a_wait_wakes_on_the_notice_of_a_plain_ack(pg_url: str) -> None:
    waiter, acker = fairq.Queue(pg_url), fairq.Queue(pg_url)
    try:
        acker.enqueue("a", {})
        lease = acker.claim()
        timer = threading.Timer(0.2, lambda: acker.ack(lease))
        started = time.monotonic()
        timer.start()
        assert waiter.wait("a", timeout=10) is None
        took = time.monotonic() - started
        timer.join()
        assert took < 0.2 + RECHECK * 0.7, took  # the notice, not the fallback look
        assert waiter.wait("a", timeout=0) is None
        # The wait's row is gone: the next settle of the event notifies no one.
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM event_result_waiter").fetchone()[0] == 0
    finally:
        waiter.close()
        acker.close()
