"""An application's transaction left open after `enqueue(..., conn=app)` (the
outbox) holds nothing that calls on other flows need: they all finish
promptly while it stays open, and the counts come out right whether it
commits or rolls back. Real threads on their own connections, a real server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import fairq
from fairq.stores.postgres import txn
from pgcheck import check_pg_invariants
from pgcluster import require_psycopg

psycopg = require_psycopg()

#: Seconds any one call beside the open outbox transaction may take (they used to wait for its commit).
BOUND = 2.0
#: Seconds to wait for the threads, at most, once a call has outlived BOUND.
PATIENCE = 60.0
#: Calls per thread. Enqueues and claims all write the "ready" counter: about
#: 200 transactions over 32 shards, so the one the outbox used to hold is met.
CALLS = 40
KINDS = ("enqueue", "enqueue", "claim", "claim", "ack", "ack")


class Calls:
    """Threads, each on its own Queue, calling on flows the outbox never touches."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.took: list[tuple[str, float]] = []
        self.running: dict[int, float] = {}  # thread number -> when its current call began
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i, kind)) for i, kind in enumerate(KINDS)]

    def _call(self, i: int, kind: str, fn: Any) -> Any:
        began = time.monotonic()
        with self._lock:
            self.running[i] = began
        result = fn()
        with self._lock:
            del self.running[i]
            self.took.append((kind, time.monotonic() - began))
        return result

    def _run(self, i: int, kind: str) -> None:
        try:
            with fairq.Queue(self.url) as q:
                for n in range(CALLS):
                    if kind == "enqueue":
                        self._call(i, kind, lambda: q.enqueue(f"e{i}-{n}", {}, flow=f"E{i}-{n}"))
                        continue
                    lease = self._call(i, "claim", q.claim)
                    assert lease is not None and lease.flow != "O"
                    if kind == "ack":
                        self._call(i, kind, lambda: q.ack(lease))
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def run_while_open(self) -> None:
        """Start the threads; return once they are done, or once a call has outlived BOUND."""
        for thread in self.threads:
            thread.start()
        while any(thread.is_alive() for thread in self.threads):
            with self._lock:
                oldest = min(self.running.values(), default=time.monotonic())
            if time.monotonic() - oldest > BOUND:
                return
            time.sleep(0.01)

    def finish(self) -> None:
        for thread in self.threads:
            thread.join(timeout=PATIENCE)
        assert not any(thread.is_alive() for thread in self.threads)
        assert not self.errors, self.errors
        slow = [(kind, round(s, 2)) for kind, s in self.took if s >= BOUND]
        assert not slow, f"calls on other flows waited for the open outbox transaction: {slow}"


@pytest.fixture
def ready_queue(pg_url: str) -> Iterator[fairq.Queue]:
    """A queue with enough ready work on other flows for every claim the threads make."""
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([(f"r{n}", {}, f"R{n}") for n in range(4 * CALLS)])
        yield q


@pytest.mark.parametrize(("end", "isolation"), [("commit", "READ_COMMITTED"), ("rollback", "READ_COMMITTED"),
                                                ("commit", "SERIALIZABLE")])
def test_an_open_outbox_transaction_stalls_no_call_on_other_flows(pg_url: str, ready_queue: fairq.Queue,
                                                                  end: str, isolation: str) -> None:
    q = ready_queue
    calls = Calls(pg_url)
    with psycopg.connect(pg_url) as app:
        app.isolation_level = psycopg.IsolationLevel[isolation]
        app.execute("CREATE TABLE orders (id text PRIMARY KEY)")
        app.commit()
        app.execute("INSERT INTO orders VALUES ('o1'), ('o2')")
        q.enqueue("o1", {"order": 1}, flow="O", conn=app)
        q.enqueue_many([("o2", {"order": 2}, "O"), ("o3", {"order": 3})], conn=app)
        try:
            calls.run_while_open()
        finally:
            app.commit() if end == "commit" else app.rollback()
        calls.finish()
    outbox = 3 if end == "commit" else 0
    stats = q.stats()
    assert stats.totals["enqueued"] == 4 * CALLS + 2 * CALLS + outbox
    assert stats.totals["claimed"] == stats.counts["inflight"] + stats.counts["acked"] == 4 * CALLS
    assert stats.counts["acked"] == stats.totals["acked"] == 2 * CALLS
    assert stats.counts["ready"] == 2 * CALLS + outbox
    assert (q.get("o1") is not None) == (end == "commit")
    check_pg_invariants(pg_url)


def test_counter_rows_an_outbox_appended_are_folded_into_the_shards(pg_url: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with fairq.Queue(pg_url) as q, psycopg.connect(pg_url) as app:
        for n in range(3):
            app.execute("SELECT 1")
            q.enqueue(f"o{n}", {}, flow=f"O{n}", conn=app)
            app.commit()

        def appended() -> int:
            return int(app.execute("SELECT count(*) FROM counter WHERE shard < 0").fetchone()[0])

        assert appended() > 0
        app.commit()
        before = q.stats()
        monkeypatch.setattr(txn, "FOLD_EVERY", 1)  # every transaction folds
        lease = q.claim()
        assert lease is not None
        q.release(lease)
        assert appended() == 0
        app.commit()
        after = q.stats()
        assert after.counts == before.counts
        assert after.totals["enqueued"] == before.totals["enqueued"] == 3
    check_pg_invariants(pg_url)
