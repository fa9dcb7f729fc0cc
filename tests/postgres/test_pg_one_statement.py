"""The one-statement verbs (schema step 4's fairq_claim, fairq_settle,
fairq_extend) leave exactly what the verbs run from Python leave: the same
events, audit rows and counters, on the same scenario at the same times
(claims, extends, acks, retries with jittered backoff, releases, fails,
expired leases, a spent budget, stale and expired settles, a refused time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, NamedTuple

import pytest

import fairq
from fairq.stores.postgres import store
from fairq.stores.postgres.connection import PgDatabase
from helpers import ROOT, TOKEN, running
from pgcluster import fresh_schema, require_psycopg

psycopg = require_psycopg()


def scenario(url: str) -> tuple[Any, ...]:
    lost: list[str] = []
    with fairq.Queue(url, clock="model", max_attempts=2) as q:
        q.enqueue_many([(f"e{i}", {"i": i}, f"F{i % 3}") for i in range(9)] + [("solo", {})], now=1)
        first = q.claim_many(4, owner="w", now=2)
        q.extend(first[0], 5, now=3)
        out = q.settle_many([(first[0], "ack"), (first[1], "retry", "later"), (first[2], "release"),
                             (first[0], "ack")], now=4)
        lost += [type(r).__name__ for r in out if isinstance(r, fairq.LeaseLost)]
        q.fail(first[3], "bad", now=4)
        again = q.claim_many(10, owner="v", now=40)  # first[1]'s backoff is over; leases end at 70
        with pytest.raises(fairq.LeaseExpired):
            q.ack(again[0], now=100)
        with pytest.raises(fairq.StaleLease):
            q.extend(first[1], now=100)
        q.claim_many(10, owner="x", now=101)  # the expired ones: audited, or quarantined (budget spent)
        with pytest.raises(fairq.ClockError):
            q.claim(now=50)
        events = [(e.event_id, e.state, e.generation, e.attempts, e.next_at, e.lease_until, e.owner, e.reason)
                  for e in q.events(limit=100)]
        audit = [(a.event_id, a.action, a.reason, a.actor, a.generation, a.at, a.detail) for a in q.audit(limit=100)]
        stats = q.stats()
        return events, audit, stats.counts, stats.totals, stats.claim_lag_buckets, lost


def test_the_one_statement_verbs_leave_what_the_python_verbs_leave(pg_server: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "ONE_STATEMENT", frozenset())
    python = scenario(fresh_schema(pg_server.url)[1])
    monkeypatch.setattr(store, "ONE_STATEMENT", frozenset({"claim", "settle", "extend"}))
    one = scenario(fresh_schema(pg_server.url)[1])
    assert one == python


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the one-statement calls made from here on, in order."""
    names: list[str] = []
    real = PgDatabase.statement

    def statement(self: PgDatabase, name: str, sql: str, params: dict[str, Any]) -> list[Any]:
        names.append(name)
        return real(self, name, sql, params)

    monkeypatch.setattr(PgDatabase, "statement", statement)
    return names


def test_a_retry_of_a_lease_claimed_in_another_process_is_one_statement(pg_url: str, sent: list[str]) -> None:
    # The jitter draw is made for the attempts the lease carries; the lease
    # object brings them, whichever process claimed it.
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([("e1", {}, "F"), ("e2", {}, "G")])
        claimed = subprocess.run(
            [sys.executable, "-c", "import dataclasses, json, sys, fairq\n"
             "with fairq.Queue(sys.argv[1]) as q:\n"
             "    print(json.dumps([dataclasses.asdict(lease) for lease in q.claim_many(2)]))", pg_url],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True, timeout=60,
            check=True)
        lease, keyed = [fairq.Lease(**fields) for fields in json.loads(claimed.stdout)]
        sent.clear()
        assert q.retry(lease, "busy").attempts == 1
        assert sent == ["settle"]
        # A lease known only by its key: the function asks for the draw, and is called again.
        sent.clear()
        assert q.retry(Key(keyed.event_id, keyed.generation), "busy").attempts == 1
        assert sent == ["settle", "settle"]


def test_a_retry_through_fairq_serve_sends_the_attempts_so_it_is_one_statement(
        pg_url: str, sent: list[str]) -> None:
    # fairq.Client sends the attempts a lease carries with its key, so the
    # server's store draws the jitter for them in its one statement.
    with fairq.Queue(pg_url) as q, running(q) as server:
        client = fairq.Client(server.url, token=TOKEN, timeout=10)
        client.enqueue("e1", {}, flow="F")
        lease = client.claim(owner="remote")
        assert lease is not None and lease.attempts == 1
        sent.clear()
        assert client.retry(lease, "busy").attempts == 1
        assert sent == ["settle"]
        assert q.get("e1").state is fairq.State.READY and q.get("e1").next_at is not None


class Key(NamedTuple):
    event_id: str
    generation: int
