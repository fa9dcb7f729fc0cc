"""The one-statement enqueue (schema step 5's fairq_enqueue) leaves exactly
what the enqueue run from Python leaves: the same events, heads, flows,
tombstones, counters, stored clock and wake-ups, on the same scenario at the
same times (new flows, busy and idle flows, delays, identical and
conflicting repeats, repeats of purged events, batches mixing them, a
refused time); a conflict raises the same error and writes nothing; it is
one statement, so a process stopped before sending it holds nothing; and two
processes enqueueing to the same flows at once leave each flow's seqs in
order, without gaps or duplicates."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fairq
from fairq.stores.postgres import store
from fairq.stores.postgres.connection import PgDatabase
from helpers import ROOT
from pgcluster import fresh_schema, require_psycopg

psycopg = require_psycopg()

ONE = frozenset({"claim", "settle", "extend", "enqueue"})


def rows(url: str) -> tuple[Any, ...]:
    """Every row an enqueue writes, as stored (the turn sequence included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        def q(sql: str) -> list[Any]:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
        return (
            q("SELECT e.event_id, f.name, e.seq, e.body, e.state, e.created_ms, e.due_ms, e.next_at_ms "
              "FROM event AS e LEFT JOIN flow AS f USING (flow_id) ORDER BY e.id"),
            q("SELECT e.event_id, h.pass, h.turn, h.dispatch_ms, h.runnable FROM head AS h "
              "JOIN event AS e ON e.id = h.event_pk ORDER BY h.turn"),
            q("SELECT name, next_seq, weight FROM flow ORDER BY flow_id"),
            q("SELECT t.event_id, f.name, t.seq, t.body_hash FROM tombstone AS t LEFT JOIN flow AS f "
              "USING (flow_id) ORDER BY t.event_id"),
            q("SELECT name, sum(n) FROM counter GROUP BY name HAVING sum(n) <> 0 ORDER BY name"),
            q("SELECT now_ms FROM queue_clock"),
            q("SELECT max(vtime), max(tail) FROM rotation"),
        )


def refused(call: Callable[[], Any]) -> tuple[Any, ...]:
    with pytest.raises(fairq.FairqError) as caught:
        call()
    exc = caught.value
    return type(exc).__name__, getattr(exc, "event_id", None), getattr(exc, "field", None), str(exc)


def scenario(url: str, notified: list[tuple[str, str]]) -> tuple[Any, ...]:
    out: list[Any] = []
    with fairq.Queue(url, clock="model") as q:
        # New flows, flows of their own, delays, an at-time in the past.
        out.append(q.enqueue_many([(f"e{i}", {"i": i}, f"F{i % 3}") for i in range(7)] + [("solo", {"s": 1})]
                                  + [{"event_id": "late", "body": [1], "flow": "L", "delay": 5}], now=1))
        out.append(q.enqueue("d1", "x", flow="D", delay=2.5, now=1))
        out.append(q.enqueue("d2", "y", delay=0.25, now=2))
        # Busy flows, and a flow made idle by an ack (its new event is its head again).
        lease = q.claim(owner="w", now=3)
        assert lease is not None
        out.append(q.enqueue("e7", {"i": 7}, flow=lease.flow, now=3))
        q.ack(lease, now=4)
        for flow in ("F0", "F1", "F2"):
            while (held := q.claim(owner="w", now=5)) is not None and held.flow != flow:
                q.ack(held, now=5)
            if held is not None:
                q.ack(held, now=5)
        out.append(q.enqueue_many([("n1", 1, "F0"), ("n2", 2, "F0"), ("n3", 3, "NEW")], now=6))
        # Identical repeats, alone and in batches (with an in-batch repeat).
        out.append(q.enqueue("e1", {"i": 1}, flow="F1", now=7))
        out.append(q.enqueue_many([("e2", {"i": 2}, "F2"), ("m1", 1, "M"), ("m1", 1, "M"), ("solo", {"s": 1})],
                                  now=7))
        # Conflicts: another body, another flow, no flow; in a batch; within a batch.
        out.append(refused(lambda: q.enqueue("e1", {"i": 99}, flow="F1", now=50)))
        out.append(refused(lambda: q.enqueue("e1", {"i": 1}, flow="F9", now=50)))
        out.append(refused(lambda: q.enqueue("solo", {"s": 1}, flow="S", now=50)))
        out.append(refused(lambda: q.enqueue_many([("x1", 1, "F0"), ("e2", {"i": 2}, None), ("x2", 1)], now=50)))
        out.append(refused(lambda: q.enqueue_many([("x1", 1, "F0"), ("x1", 2, "F0")], now=50)))
        out.append(refused(lambda: q.enqueue_many([("x1", 1, "F0"), ("x3", 1), ("x1", 1, "F1"), ("e1", 0, "F1")],
                                                  now=50)))
        out.append(refused(lambda: q.enqueue("e1", {"i": 1}, flow="F1", now=0)))  # before the stored clock
        # Purged events: their tombstones judge repeats.
        while (held := q.claim(owner="w", now=60)) is not None:
            q.ack(held, now=60)
        q.purge(acked_before=61, dedup_window=None, now=61)
        out.append(q.enqueue("e3", {"i": 3}, flow="F0", now=62))
        out.append(refused(lambda: q.enqueue("e3", {"i": 4}, flow="F0", now=62)))
        out.append(refused(lambda: q.enqueue("e3", {"i": 3}, flow="F1", now=62)))
        out.append(refused(lambda: q.enqueue("d2", "y", flow="D", now=62)))
        # A batch mixing them: new, stored, tombstoned, repeated in the batch, delayed.
        out.append(q.enqueue_many([{"event_id": "z1", "body": 1, "flow": "F0", "delay": 1}, ("n1", 1, "F0"),
                                   ("d2", "y"), ("z2", 2, "F0"), ("z1", 1, "F0"), ("z3", 3)], now=63))
        out.append(q.enqueue("z4", 4, flow="F0", now=63))
        stats = q.stats(now=64)
        out.append((stats.counts, stats.totals))
    notified.extend(settle_notifications(url))
    return tuple(out), rows(url)


_LISTENERS: dict[str, Any] = {}


def listen(url: str) -> None:
    conn = psycopg.connect(url, autocommit=True)
    got: list[tuple[str, str]] = []
    conn.add_notify_handler(lambda n: got.append((n.channel, n.payload)))
    conn.execute("LISTEN fairq_ready")
    conn.execute("LISTEN fairq_due")
    # Counts as a sleeping worker (fairq.stores.postgres.listen's mark), whom every wake-up is for.
    conn.execute("SELECT pg_advisory_lock_shared(26228, 0)")
    _LISTENERS[url] = (conn, got)


def settle_notifications(url: str) -> list[tuple[str, str]]:
    """Every notification the listener got, once no more arrive."""
    conn, got = _LISTENERS.pop(url)
    seen, deadline = -1, time.monotonic() + 20
    while time.monotonic() < deadline and seen != len(got):
        seen = len(got)
        time.sleep(0.5)
        conn.execute("SELECT 1")
    conn.close()
    return list(got)


def run_both(server_url: str, monkeypatch: pytest.MonkeyPatch,
             body: Callable[[str, list[tuple[str, str]]], Any]) -> tuple[Any, Any]:
    results = []
    for one in (frozenset(), ONE):
        monkeypatch.setattr(store, "ONE_STATEMENT", one)
        url = fresh_schema(server_url)[1]
        fairq.Queue(url, clock="model").close()
        listen(url)
        notified: list[tuple[str, str]] = []
        results.append((body(url, notified), notified))
    return results[0], results[1]


def test_the_one_statement_enqueue_leaves_what_the_python_enqueue_leaves(pg_server: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    python, one = run_both(pg_server.url, monkeypatch, scenario)
    assert one == python
    (answers, _), notified = one
    refusals = [a[0] for a in answers if isinstance(a, tuple) and a and a[0] in ("Conflict", "ClockError")]
    assert refusals == ["Conflict"] * 6 + ["ClockError"] + ["Conflict"] * 3
    assert any(channel == "fairq_due" for channel, _ in notified)
    assert any(channel == "fairq_ready" for channel, _ in notified)


def test_a_conflict_raises_the_python_error_and_writes_nothing(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "ONE_STATEMENT", ONE)
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue_many([("a", {"v": 1}, "F"), ("b", {"v": 2}), ("c", {"v": 3}, "F")], now=10)
        q.settle_many([(lease, "ack") for lease in q.claim_many(2, now=10)], now=10)
        q.purge(acked_before=11, now=11)  # a and b: tombstones; c: stored
        before = rows(pg_url)
        for batch in ([("new", 1, "F"), ("a", {"v": 1}, "G")], [("new", 1, "F"), ("b", {"v": 3})],
                      [("new", 1, "F"), ("c", {"v": 3}, "G")], [("new", 1, "F"), ("c", {"v": 4}, "F")],
                      [("new", 1, "F"), ("new", 1, "G")], [("new", 1, "H"), ("new", 1)]):
            with pytest.raises(fairq.Conflict) as caught:
                q.enqueue_many(batch, now=20)  # a later time: not stored either
            assert caught.value.event_id == batch[1][0]
            assert rows(pg_url) == before
        with pytest.raises(fairq.Conflict) as caught:
            q.enqueue("a", {"v": 1}, flow=None, now=20)
        assert caught.value.field == "flow"
        assert str(caught.value) == "event 'a' is already stored in flow 'F', not in a flow of its own"
        assert rows(pg_url) == before


def test_enqueue_and_enqueue_many_are_one_statement(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "ONE_STATEMENT", ONE)
    sent: list[str] = []
    real_statement, real_write = PgDatabase.statement, PgDatabase.write

    def statement(self: PgDatabase, name: str, sql: str, params: dict[str, Any]) -> list[Any]:
        sent.append(name)
        return real_statement(self, name, sql, params)

    @contextlib.contextmanager
    def write(self: PgDatabase, name: str, *args: Any) -> Iterator[Any]:
        sent.append(f"transaction {name}")  # begun
        with real_write(self, name, *args) as conn:
            yield conn

    with fairq.Queue(pg_url) as q:
        monkeypatch.setattr(PgDatabase, "statement", statement)
        monkeypatch.setattr(PgDatabase, "write", write)
        assert q.enqueue("a", {}, flow="F").created
        assert [e.seq for e in q.enqueue_many([("b", {}, "F"), ("c", {}, "F"), ("a", {}, "F")])] == [2, 3, 1]
        with pytest.raises(fairq.Conflict):
            q.enqueue("a", {"other": 1}, flow="F")
        assert sent == ["enqueue"] * 3
        with psycopg.connect(pg_url) as app:  # the outbox runs from Python, in the application's transaction
            app.execute("SELECT 1")
            q.enqueue("o", {}, flow="F", conn=app)
            app.commit()
        assert sent == ["enqueue"] * 3 and q.get("o").seq == 4


CHILD = """
import json, sys, fairq
me, url, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = []
with fairq.Queue(url) as q:
    for r in range(rounds):
        if r % 2:
            got = q.enqueue_many([(f"{me}-{r}-{k}", {"k": k}, f"F{k % 3}") for k in range(4)]
                                 + [(f"shared-{r}", {"r": r}, "F0")])
        else:
            got = [q.enqueue(f"{me}-{r}", {"r": r}, flow=f"F{r % 3}"), q.enqueue(f"shared-{r}", {"r": r}, flow="F0")]
        out += [[e.event_id, e.flow, e.seq, e.created] for e in got]
print(json.dumps(out))
"""


def test_two_processes_enqueueing_to_the_same_flows_keep_seq_order(pg_url: str) -> None:
    fairq.Queue(pg_url).close()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, me, pg_url, "30"], env=env, stdout=subprocess.PIPE,
                                 text=True) for me in ("p", "q")]
    answers = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    created = [a for answer in answers for a in answer if a[3]]
    # Each shared id is created once; its repeat answers the same seq.
    shared = {a[0]: a[2] for a in created if a[0].startswith("shared-")}
    assert len(shared) == 30
    assert all(shared[a[0]] == a[2] for answer in answers for a in answer if a[0].startswith("shared-"))
    with fairq.Queue(pg_url) as q:
        for flow in ("F0", "F1", "F2"):
            stored = sorted((e.seq, e.event_id) for e in q.events(flow=flow, limit=10_000))
            assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))  # no gap, no duplicate
            assert sorted((a[2], a[0]) for a in created if a[1] == flow) == stored
            # Each process's own events keep the order it enqueued them in.
            for me, answer in zip(("p", "q"), answers):
                mine = [a[2] for a in answer if a[1] == flow and a[0].startswith(f"{me}-")]
                assert mine == sorted(mine)
        assert q.stats().counts["ready"] == len(created) == 2 * (15 + 15 * 4) + 30
        with psycopg.connect(pg_url) as conn:  # one head per flow: its lowest seq
            heads = conn.execute("SELECT f.name, e.seq FROM head AS h JOIN event AS e ON e.id = h.event_pk "
                                 "JOIN flow AS f ON f.flow_id = h.flow_id ORDER BY 1").fetchall()
        assert heads == [("F0", 1), ("F1", 1), ("F2", 1)]


FROZEN_CHILD = """
import sys, fairq
with fairq.Queue(sys.argv[1]) as q:
    q.enqueue_many([("x1", {}, "F"), ("x2", {}, "G")])
"""


def test_a_process_stopped_before_its_one_statement_enqueue_holds_nothing(pg_url: str) -> None:
    # Stopped where a transaction run from Python would hold its flow and id
    # locks: its sessions are idle, outside any transaction, holding no lock.
    with fairq.Queue(pg_url) as q:
        q.enqueue("f1", {}, flow="F")
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FAIRQ_FREEZE_AT": "enqueue.before_commit"}
        child = subprocess.Popen([sys.executable, "-c", FROZEN_CHILD, f"{pg_url}&application_name=frozen"], env=env,
                                 stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while child.poll() is None and not stopped(child.pid):
                assert time.monotonic() < deadline, "gave up waiting for the child to stop"
                time.sleep(0.02)
            assert child.poll() is None, child.stderr.read() if child.stderr else b""
            with psycopg.connect(pg_url, autocommit=True) as conn:
                found = conn.execute(
                    "SELECT a.state, (SELECT count(*) FROM pg_locks AS l WHERE l.pid = a.pid AND l.granted) "
                    "FROM pg_stat_activity AS a WHERE a.application_name = 'frozen'").fetchall()
                assert found and all(state == "idle" and locks == 0 for state, locks in found), found
            # Enqueues to its flows, and of its ids, go on beside it (one
            # still waiting after 20 s kills it, so the test fails, not hangs).
            watchdog = threading.Timer(20, child.kill)
            watchdog.start()
            began = time.monotonic()
            try:
                got = q.enqueue_many([("f2", {}, "F"), ("x1", {}, "F"), ("x2", {}, "G")])
            finally:
                watchdog.cancel()
            assert time.monotonic() - began < 10 and child.poll() is None  # stopped all along
            assert [e.seq for e in got] == [2, 3, 1]
        finally:
            child.kill()
            child.wait(timeout=30)
        assert q.get("x1").seq == 3


def stopped(pid: int) -> bool:
    """Is the process stopped (state T in /proc)?"""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"
