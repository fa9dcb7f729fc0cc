"""Each rule the one-statement verbs evaluate in SQL (schema step 4) gives
the answer fairq.kernel.rules / fairq.kernel.policy gives, over thousands of random inputs:
the time a call runs at, the rotation step and join place, an expired
lease's fate, the fence verdict, the settle decision with backoff and jitter
(the draw is an input, so both sides get the same), the claim-lag bucket and
the seconds written into audit details; (schema step 5) whether a
repeat enqueue matches what it repeats and where each new event goes; and
(schema step 10) the budget and backoff an event is judged by."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairq
from fairq.kernel import policy, rows, rules
from fairq.stores.backend import NewEvent
from fairq.errors import ClockError, Conflict, LeaseExpired, StaleLease
from fairq.kernel.policy import Backoff
from fairq.types import Outcome
from pgcluster import require_psycopg

psycopg = require_psycopg()

#: Examples per rule (the total is printed by the count test below).
EXAMPLES = 1500
RULES = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
MS = st.integers(min_value=0, max_value=4 * 10**15)
BIG = st.integers(min_value=0, max_value=2**62)


@pytest.fixture(scope="module")
def sql(pg_server: Any) -> Iterator[Any]:
    """A connection to a schema holding a queue (its rule functions)."""
    import pgcluster

    name, url = pgcluster.fresh_schema(pg_server.url)
    fairq.Queue(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn
    pgcluster.drop_schema(pg_server.url, name)


def one(conn: Any, query: str, params: dict[str, Any]) -> Any:
    return conn.execute(query, params).fetchone()


def test_the_time_a_call_runs_at(sql: Any) -> None:
    @RULES
    @given(MS, MS, st.booleans())
    def check(requested: int, stored: int, explicit: bool) -> None:
        got = one(sql, "SELECT fairq_effective_now(%(r)s, %(s)s, %(e)s)", {"r": requested, "s": stored,
                                                                           "e": explicit})[0]
        try:
            want: int | None = policy.effective_now(requested, stored, explicit=explicit)
        except ClockError:
            want = None
        assert got == want
    check()


def test_the_rotation_step_and_the_join_place(sql: Any) -> None:
    @RULES
    @given(BIG, st.integers(min_value=1, max_value=policy.MAX_WEIGHT), BIG, BIG)
    def check(pass_: int, weight: int, vtime: int, tail: int) -> None:
        got = one(sql, "SELECT r.*, fairq_join_pass(%(t)s) FROM fairq_rotate(%(p)s, %(w)s, %(v)s, %(t)s) AS r",
                  {"p": pass_, "w": weight, "v": vtime, "t": tail})
        assert tuple(got[:3]) == tuple(rules.rotate(pass_, weight, vtime=vtime, tail=tail))
        assert got[3] == rules.join_pass(tail)
    check()


def test_an_expired_leases_fate(sql: Any) -> None:
    @RULES
    @given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=10**6))
    def check(attempts: int, max_attempts: int) -> None:
        got = one(sql, "SELECT * FROM fairq_expired_lease_fate(%(a)s, %(m)s)", {"a": attempts, "m": max_attempts})
        fate = rules.expired_lease_fate(attempts, max_attempts)
        assert tuple(got) == ((None, None) if fate is None else (fate.reason, fate.cause))
    check()


def test_the_fence_verdict(sql: Any) -> None:
    states = st.sampled_from([None, "ready", "inflight", "acked", "quarantined"])

    @RULES
    @given(st.integers(0, 5), MS, states, st.integers(0, 5), MS, st.booleans())
    def check(generation: int, now: int, state: str | None, stored_gen: int, until: int, in_batch: bool) -> None:
        if state == "inflight" and stored_gen == 0:
            stored_gen = 1
        got = one(sql, "SELECT fairq_fence(%(g)s, %(n)s, %(s)s, %(sg)s, %(u)s, %(b)s)",
                  {"g": generation, "n": now, "s": state, "sg": None if state is None else stored_gen,
                   "u": until if state == "inflight" else None, "b": in_batch})[0]
        lost = rules.fence("e", generation, now, state=state, stored_generation=None if state is None else stored_gen,
                           lease_until_ms=until if state == "inflight" else None, settled_in_batch=in_batch)
        want = {type(None): None, StaleLease: "stale", LeaseExpired: "expired"}[type(lost)]
        assert got == want
    check()


def test_the_settle_decision_with_backoff_and_jitter(sql: Any) -> None:
    floats = st.floats(min_value=0, max_value=1e11, allow_nan=False, allow_infinity=False)

    @RULES
    @given(st.sampled_from(list(Outcome)), st.integers(1, 60), st.integers(1, 60), MS,
           st.one_of(st.none(), st.floats(min_value=0, max_value=1e6, allow_nan=False)),
           floats, st.floats(min_value=1, max_value=1e11, allow_nan=False), floats, st.booleans(),
           st.text(min_size=1, max_size=12), st.integers(1, 10**6))
    def check(outcome: Outcome, attempts: int, max_attempts: int, now: int, delay: float | None, base: float,
              factor: float, cap: float, jitter: bool, event_id: str, generation: int) -> None:
        backoff = Backoff(base, factor, cap, jitter)
        want = policy.decide(outcome, event_id=event_id, generation=generation, attempts=attempts,
                             max_attempts=max_attempts, now_ms=now, delay=delay, backoff=backoff)
        got = one(sql, "SELECT * FROM fairq_decide(%(o)s, %(a)s, %(m)s, %(n)s, %(d)s, %(b)s, %(f)s, %(c)s, %(j)s, "
                       "%(u)s)",
                  {"o": outcome.value, "a": attempts, "m": max_attempts, "n": now,
                   "d": None if delay is None else policy.to_ms(delay), "b": base, "f": factor, "c": cap,
                   "j": jitter, "u": policy.jitter_draw(event_id, generation, attempts)})
        assert tuple(got) == (want.state.value, want.next_at_ms, want.quarantine_cause, want.attempts)
    check()


def test_the_budget_and_backoff_an_event_is_judged_by(sql: Any) -> None:
    floats = st.floats(min_value=0, max_value=1e11, allow_nan=False, allow_infinity=False)
    backoffs = st.builds(Backoff, floats, st.floats(min_value=1, max_value=1e11, allow_nan=False), floats,
                         st.booleans())

    @RULES
    @given(st.one_of(st.none(), st.integers(1, 10**6)), st.one_of(st.none(), backoffs), st.integers(1, 10**6),
           backoffs)
    def check(own_max: int | None, own: Backoff | None, queue_max: int, queue: Backoff) -> None:
        text = None if own is None else policy.backoff_text(own)
        want_max, want = policy.own_budget(own_max, text, queue_max, queue)
        got = one(sql, "SELECT * FROM fairq_own_budget(%(m)s, %(t)s, %(qm)s, %(b)s, %(f)s, %(c)s, %(j)s)",
                  {"m": own_max, "t": text, "qm": queue_max, "b": queue.base, "f": queue.factor, "c": queue.cap,
                   "j": queue.jitter})
        assert tuple(got) == (want_max, want.base, want.factor, want.cap, want.jitter)
    check()


def test_the_claim_lag_bucket(sql: Any) -> None:
    @RULES
    @given(st.one_of(st.integers(-10**6, 4 * 10**6), st.sampled_from(policy.CLAIM_LAG_BOUNDS_MS)))
    def check(lag: int) -> None:
        assert one(sql, "SELECT fairq_lag_bucket(%(l)s)", {"l": lag})[0] == policy.lag_bucket(lag)
    check()


def test_seconds_in_audit_details_are_written_as_python_writes_them(sql: Any) -> None:
    @RULES
    @given(st.one_of(MS, st.integers(0, 10**7)))
    def check(ms: int) -> None:
        assert one(sql, "SELECT fairq_seconds_json(%(m)s)", {"m": ms})[0] == json.dumps(policy.from_ms(ms))
    check()


def test_whether_a_repeat_enqueue_matches(sql: Any) -> None:
    flows = st.sampled_from([None, "A", "B", "a", "A "])
    bodies = st.one_of(st.sampled_from(['{"a":1}', '{"a":2}', '"x"', "1", "1.0"]),
                       st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]),
                               max_size=20))

    @RULES
    @given(flows, bodies, flows, bodies, st.booleans())
    def check(flow: str | None, body: str, stored_flow: str | None, stored_body: str, tombstone: bool) -> None:
        kept: str | bytes = rules.body_hash(stored_body) if tombstone else stored_body
        got = one(sql, "SELECT fairq_repeats(%(f)s, %(b)s, %(h)s, %(sf)s, %(sb)s, %(sh)s)",
                  {"f": flow, "b": body, "h": rules.body_hash(body), "sf": stored_flow,
                   "sb": None if tombstone else stored_body, "sh": kept if tombstone else None})[0]
        try:
            rules.check_repeat("e", flow, body, stored_flow=stored_flow, stored_body=kept)
        except Conflict:
            assert got is False
        else:
            assert got is True
    check()


def test_where_each_new_event_goes(sql: Any) -> None:
    items = st.lists(st.tuples(st.sampled_from([None, "A", "B", "C"]), st.integers(0, 10**9),
                               st.one_of(st.none(), MS)), min_size=1, max_size=12)

    @RULES
    @given(items, MS, st.lists(st.tuples(st.integers(1, 10**12), st.booleans()), min_size=3, max_size=3))
    def check(batch: list[tuple[str | None, int, int | None]], now: int, slots: list[tuple[int, bool]]) -> None:
        events = [NewEvent(f"e{i}", flow, "{}", delay, at) for i, (flow, delay, at) in enumerate(batch)]
        names = sorted({e.flow for e in events if e.flow is not None})
        flows = {name: [0, first, busy] for name, (first, busy) in zip(names, slots)}
        got = sql.execute("SELECT o_seq, o_head, o_next_at FROM fairq_placed(%(f)s::text[], %(d)s::bigint[], "
                          "%(a)s::bigint[], %(n)s, %(names)s::text[], %(first)s::bigint[], %(busy)s::boolean[]) "
                          "ORDER BY o_i",
                          {"f": [e.flow for e in events], "d": [e.delay_ms for e in events],
                           "a": [e.at_ms for e in events], "n": now, "names": names,
                           "first": [flows[n][1] for n in names], "busy": [flows[n][2] for n in names]}).fetchall()
        want = [(p.seq, p.head, p.next_at_ms) for p in rows.placed(events, flows, now)]
        assert [tuple(r) for r in got] == want
    check()
