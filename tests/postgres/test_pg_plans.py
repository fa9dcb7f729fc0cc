"""The claim path's statements use the head table's indexes: after ANALYZE on
a realistic backlog (many waiting events, many blocked flows), the plans of
the one-statement functions' statements (auto_explain, nested statements,
sent to the test's session as notices) and of the verbs run from Python
(EXPLAIN) show no sequential scan of the events or the heads, so a claim's
cost does not depend on the backlog or on blocked flows."""

from __future__ import annotations

import re

import time
from typing import Any

import pytest

import fairq
from fairq.kernel import policy, rules
from fairq.stores.postgres import claim, enqueue_one, store, verbs
from fairq.stores.postgres.txn import TxnCore
from pgcluster import require_psycopg

psycopg = require_psycopg()


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every statement the store runs, with its parameters, from now on."""
    seen: list[tuple[str, Any]] = []
    real = TxnCore.execute

    def execute(self: TxnCore, sql: str, params: Any = None) -> Any:
        seen.append((sql, params))
        return real(self, sql, params)

    monkeypatch.setattr(TxnCore, "execute", execute)
    return seen


def plans(url: str, statements: list[tuple[str, Any]]) -> list[str]:
    """The EXPLAIN text of each statement, inside a transaction rolled back."""
    out = []
    with psycopg.connect(url) as conn:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT", "DELETE", "WITH")) \
                    or "FROM generate_series" in sql or "pg_advisory" in sql or "pg_notify" in sql:
                continue
            rows = conn.execute("EXPLAIN " + sql, params).fetchall()
            out.append(sql + "\n" + "\n".join(r[0] for r in rows))
        conn.rollback()
    return out


def backlog(q: fairq.Queue, url: str) -> None:
    """4,000 flows with 10 events each, then 3,000 of them blocked by a live lease; ANALYZE."""
    for start in range(0, 4000, 500):
        q.enqueue_many([{"event_id": f"e{f}-{i}", "body": {"n": i}, "flow": f"f{f}"}
                        for f in range(start, start + 500) for i in range(10)])
    for _ in range(6):
        q.claim_many(500)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def test_the_one_statement_verbs_read_no_event_sequentially_beside_a_large_backlog_and_blocked_flows(
        pg_url: str) -> None:
    with fairq.Queue(pg_url, lease_seconds=3600) as q:
        backlog(q, pg_url)
    found: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: found.append(str(diag.message_primary)))
        for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                        "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_level = 'notice'",
                        "SET client_min_messages = 'notice'"):
            conn.execute(setting)
        # The statements verbs.py sends, as Queue.claim_many(3), settle_many and extend send them.
        call = {"model": False, "requested": 0, "explicit": False}
        claimed = conn.execute(claim._CLAIM, {**call, "n": 3, "owner": None, "lease_ms": None,
                                              "max_attempts": None, "fold": 256}).fetchall()
        assert len(claimed) == 3
        ids, gens, attempts = [r[0] for r in claimed], [r[4] for r in claimed], [r[5] for r in claimed]
        settled = conn.execute(verbs._SETTLE, {
            **call, "ids": ids, "gens": gens, "outcomes": ["ack", "retry", "release"], "reasons": [None] * 3,
            "delays": [None] * 3, "draws": [policy.jitter_draw(*key) for key in zip(ids, gens, attempts)],
            "draw_attempts": attempts, "max_attempts": None, "base": None, "factor": None, "cap": None,
            "jitter": None, "fold": 0}).fetchall()
        assert [r[0] for r in settled] == ["settled"] * 3
        (lease,) = conn.execute(claim._CLAIM, {**call, "n": 1, "owner": None, "lease_ms": None,
                                               "max_attempts": None, "fold": 0}).fetchall()
        (extended,) = conn.execute(verbs._EXTEND, {**call, "id": lease[0], "gen": lease[4],
                                                   "lease_ms": 60000}).fetchall()
        assert extended[0] == "extended"
        # An enqueue of a new event and a repeat, to a flow with work and a new one.
        ids = ["e7-0", "late-0", "late-1"]
        bodies = ['{"n":0}', '{"n":1}', '{"n":2}']
        added = conn.execute(enqueue_one._ENQUEUE, {
            **call, "ids": ids, "flows": ["f7", "f7", "new"], "bodies": bodies,
            "hashes": [rules.body_hash(b) for b in bodies], "delays": [0] * 3, "ats": [None] * 3,
            "fold": 0, "tenants": [None] * 3, "kinds": None, "max_attempts": None, "timeouts": None,
            "backoffs": None}).fetchall()
        assert sorted(r[0] for r in added) == ["new", "new", "stored"], added
    assert any("head_rotation" in p for p in found), "\n\n".join(found)
    assert all(any(f in p for p in found) for f in ("fairq_settle", "fairq_extend", "fairq_enqueue"))
    # (event_result_waiter, empty unless someone waits, may be read whole)
    scans = [p for p in found if re.search(r"Seq Scan on (event|head)\b", p)]
    assert not scans, "\n\n".join(scans)


def test_the_one_statement_verbs_plan_their_statements_once_per_session(pg_url: str) -> None:
    # A custom plan made on every call cost more than running the statement
    # (a claim spent 0.25 ms planning one of its writes): each verb and its
    # bookkeeping keep the generic plans the test above checks.
    with fairq.Queue(pg_url):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # (fairq_bookkeep: the current one; one in SQL calls it for an older fairq.)
        config = dict(conn.execute(
            "SELECT p.proname, p.proconfig FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace "
            "WHERE n.nspname = current_schema() AND p.proname LIKE 'fairq%%' "
            "AND (p.proname <> 'fairq_bookkeep' OR p.prolang = (SELECT oid FROM pg_language "
            "WHERE lanname = 'plpgsql'))").fetchall())
    for verb in ("fairq_claim", "fairq_settle", "fairq_extend", "fairq_bookkeep", "fairq_enqueue"):
        assert "plan_cache_mode=force_generic_plan" in (config[verb] or []), (verb, config[verb])


def test_the_verbs_run_from_python_read_no_event_sequentially_beside_a_large_backlog_and_blocked_flows(
        pg_url: str, recorded: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    # A verb inside a transaction (a settle with an effect, the outbox) runs
    # the same functions inside it; what it sends besides reads no event or
    # head sequentially either.
    monkeypatch.setattr(store, "ONE_STATEMENT", frozenset())
    with fairq.Queue(pg_url, lease_seconds=3600) as q:
        backlog(q, pg_url)
        recorded.clear()
        leases = q.claim_many(3)
        q.settle_many([(leases[0], "ack"), (leases[1], "retry"), (leases[2], "release")])
        q.extend(q.claim(), 60)
    assert all(any(f in sql for sql, _ in recorded) for f in ("fairq_claim", "fairq_settle"))
    found = plans(pg_url, recorded)
    # (event_result_waiter, empty unless someone waits, may be read whole)
    scans = [p for p in found if re.search(r"Seq Scan on (event|head)\b", p)]
    assert not scans, "\n\n".join(scans)


def test_claims_and_settles_update_events_in_place_without_touching_their_indexes(pg_url: str) -> None:
    # Lease columns change on every claim and settle; none is indexed, and the
    # table leaves room on each page, so the updates are HOT (heap-only).
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([{"event_id": f"e{i}", "body": {}, "flow": f"f{i % 20}"} for i in range(400)])
        while leases := q.claim_many(20):
            q.settle_many([(lease, "ack") for lease in leases])
    # The queue's connection has closed: its statistics have reached the server.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for _ in range(50):  # statistics arrive shortly after a backend exits; only stops a hang
            conn.execute("SELECT pg_stat_clear_snapshot()")
            updated, hot = conn.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                "WHERE schemaname = current_schema() AND relname = 'event'").fetchone()
            if updated >= 800:
                break
            time.sleep(0.1)
    assert updated >= 800  # a claim and an ack per event
    assert hot >= 0.75 * updated, (hot, updated)  # measured: 91 %


class _Recording:
    """A connection that records every statement it runs."""

    def __init__(self, conn: Any, seen: list[tuple[str, Any]]) -> None:
        self.conn, self.seen = conn, seen

    def execute(self, sql: str, params: Any = None) -> Any:
        self.seen.append((sql, params))
        return self.conn.execute(sql, params)


def test_the_console_listings_page_through_indexes_beside_a_large_history(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from fairq.stores.postgres.reads import PgReads

    with fairq.Queue(pg_url, clock="model", lease_seconds=3600) as q:
        # 2,000 flows of 10 events; 1,000 heads retried (an audit row each), 500 quarantined,
        # and a schedule with its misfires among them.
        for start in range(0, 2000, 500):
            q.enqueue_many([{"event_id": f"e{f}-{i}", "body": {"n": i}, "flow": f"f{f:04}"}
                            for f in range(start, start + 500) for i in range(10)], now=0)
        q.settle_many([(lease, "retry") for lease in q.claim_many(1000, now=0)], now=0)
        q.settle_many([(lease, "fail", "bad") for lease in q.claim_many(500, now=0)], now=0)
        q.schedules.add("beat", every=60, start=0, misfire="skip", grace=0)
        for minutes in range(1, 20):
            q.tick(now=minutes * 130)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        seen: list[tuple[str, Any]] = []
        real_init = PgReads.__init__

        def recording_init(self: PgReads, conn: Any, *, server_clock: bool) -> None:
            real_init(self, _Recording(conn, seen), server_clock=server_clock)

        monkeypatch.setattr(PgReads, "__init__", recording_init)
        middle = q.events(limit=1, after="e1000-5")[0].event_id
        q.events(limit=50, after=middle)
        q.events(state="ready", limit=50, after=middle)
        q.events(state="quarantined", limit=50, after=q.events(state="quarantined", limit=10)[-1].event_id)
        q.events(flow="f1000", limit=5, after="e1000-2")
        q.flows(after="f1000", limit=50)
        q.flows(limit=50)
        assert len(q.schedules.misfires("beat", limit=5)) == 5
    found = plans(pg_url, seen)
    assert any("audit_misfire" in p for p in found), "\n\n".join(found)
    scans = [p for p in found if "Seq Scan on event" in p or "Seq Scan on head" in p or "Seq Scan on audit" in p
             or "Seq Scan on flow" in p or "Sort" in p]
    assert not scans, "\n\n".join(scans)
    # Every walk of the event table starts at its key (the page's `after`), not at the first event.
    walks = [p for p in found if _unbounded_walk_of_events(p)]
    assert not walks, "\n\n".join(walks)


def _unbounded_walk_of_events(plan: str) -> bool:
    lines = plan.splitlines()
    return any("Index Scan using event_pkey on event" in line
               and (i + 1 == len(lines) or "Index Cond" not in lines[i + 1]) for i, line in enumerate(lines))
