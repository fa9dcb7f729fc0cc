"""One notice wakes as many idle workers as it has work for: of the threads of one
process asleep in Queue.wait_for_work, a transaction that makes one head claimable
wakes one (the longest asleep), one that makes three claimable wakes three, and the
rest sleep on; a notice without a count wakes every one. Real threads, a real server."""

from __future__ import annotations

import threading
import time

import fairq
from fairq.stores.postgres import READY_CHANNEL
from pgcluster import require_psycopg

psycopg = require_psycopg()

SLEEPERS = 6
HANG = 30.0  # seconds; only to stop a hung test
QUIET = 0.5  # seconds in which a thread that is not woken must stay asleep


class Sleepers:
    """SLEEPERS threads that each wait for work again and again, counting wake-ups."""

    def __init__(self, q: fairq.Queue) -> None:
        self.q = q
        self.woken = 0
        self.asleep = 0
        self.stop = threading.Event()
        self.cond = threading.Condition()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(SLEEPERS)]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        self.q.wait_for_work(1.0, self.stop)  # the first wait marks the process and returns: look again
        while not self.stop.is_set():
            with self.cond:
                self.asleep += 1
                self.cond.notify_all()
            self.q.wait_for_work(HANG, self.stop)
            with self.cond:
                self.asleep -= 1
                if not self.stop.is_set():
                    self.woken += 1
                self.cond.notify_all()

    def settled(self, asleep: int) -> int:
        """Wake-ups so far, once `asleep` threads sleep and nothing changed for QUIET seconds."""
        deadline = time.monotonic() + HANG
        with self.cond:
            while True:
                seen = (self.asleep, self.woken)
                self.cond.wait(QUIET)
                if (self.asleep, self.woken) == seen and self.asleep >= asleep:
                    return self.woken
                assert time.monotonic() < deadline, (self.asleep, self.woken)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(HANG)


def test_a_notice_wakes_as_many_sleeping_threads_as_heads_it_made_claimable(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q, fairq.Queue(pg_url) as other:
        sleepers = Sleepers(q)
        try:
            base = sleepers.settled(SLEEPERS)  # (the listening connection's start wakes them once)
            other.enqueue("one", {})  # one head: one thread wakes (and sleeps again)
            assert sleepers.settled(SLEEPERS) == base + 1
            other.enqueue_many([("a", {}, "A"), ("b", {}, "B"), ("c", {}, "C")])  # three heads
            assert sleepers.settled(SLEEPERS) == base + 4
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("SELECT pg_notify(%s, '')", (READY_CHANNEL,))  # not counted: every one
            assert sleepers.settled(SLEEPERS) == base + 4 + SLEEPERS
        finally:
            sleepers.close()
