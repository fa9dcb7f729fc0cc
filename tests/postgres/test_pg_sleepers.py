"""A one-statement verb sends NOTIFY only while some worker may be asleep
(fairq_asleep; fairq.stores.postgres.listen marks a process that may sleep). The
race that matters: a transaction checks, finds nobody asleep and has not yet
committed when a worker goes to sleep. Marking waits for that commit, so the
worker's look for work after marking finds what it made claimable.

Interleaved deterministically: the ack stops after its bookkeeping (its
check done) and before it commits (pgpause); a worker then goes idle."""

from __future__ import annotations

import threading
import time

import fairq
from pgcluster import require_psycopg
from pgpause import PAUSED, held, pause_at, wait_paused, with_name
from pgsessions import HANG, waiting_for_a_lock

psycopg = require_psycopg()

#: A pick-up slower than this came from something else than a wake-up or a look after marking.
PROMPT = 5.0


def test_a_worker_going_to_sleep_while_an_unannounced_ack_commits_finds_its_work(pg_url: str) -> None:
    acker = fairq.Queue(with_name(pg_url, PAUSED))
    worker = fairq.Queue(with_name(pg_url, "sleeper"))
    got: list[tuple[str, float]] = []
    stop = threading.Event()

    def idle_worker() -> None:
        while not stop.is_set() and not got:
            lease = worker.claim(lease_seconds=HANG)
            if lease is not None:
                got.append((lease.event_id, time.monotonic()))
                return
            worker.wait_for_work(HANG, stop)

    try:
        acker.enqueue_many([("a", {}, "F"), ("b", {}, "F")])
        lease = acker.claim(lease_seconds=HANG * 2)
        assert lease is not None and lease.event_id == "a"
        pause_at(pg_url, "fairq_settle", "                           v_ready, CASE WHEN v_ready > 0 THEN NULL "
                                         "ELSE v_due END);")
        with held(pg_url):
            ta = threading.Thread(target=lambda: acker.ack(lease))
            ta.start()
            wait_paused(pg_url)  # the ack found nobody asleep (it sends no NOTIFY); not committed
            tw = threading.Thread(target=idle_worker)
            tw.start()
            deadline = time.monotonic() + 2.0  # marking waits for the ack to commit
            while not waiting_for_a_lock(pg_url, "sleeper") and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not got
            released = time.monotonic()
        ta.join(HANG)
        tw.join(PROMPT + 1.0)
        assert [event_id for event_id, _ in got] == ["b"]
        assert got[0][1] - released < PROMPT
    finally:
        stop.set()
        acker.close()
        worker.close()


def marked(url: str) -> int:
    """Sessions holding the mark of a process that may sleep."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 26228 "
                           "AND objid = 0 AND objsubid = 2 AND granted").fetchone()
    return int(row[0]) if row else 0


def test_a_queue_is_marked_while_it_waits_and_unmarked_soon_after(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        assert marked(pg_url) == 0
        started = time.monotonic()
        assert q.wait_for_work(HANG) is True  # the first wait marks, then returns: look again
        assert time.monotonic() - started < HANG / 2
        assert marked(pg_url) == 1
        assert q.wait_for_work(0.2) is True  # marked since the last look: a real sleep
        deadline = time.monotonic() + HANG
        while marked(pg_url) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(pg_url) == 0  # no wait for LINGER: busy again, its commits need no NOTIFY
        assert time.monotonic() - started < HANG / 2
