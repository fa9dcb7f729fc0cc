"""Each tenant rule the one-statement verbs evaluate in SQL (schema step 7,
migrations/tenants.sql) gives the answer fairq.kernel.tenants gives, over
thousands of random inputs: the two-level rotation step, a token bucket's
level and when its next token is there (a missing bucket is full)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairq.errors import InvalidInput
from fairq.kernel.tenants import Bucket, tenant_step
from test_pg_rules_sql import one, sql  # noqa: F401  (the fixture)

EXAMPLES = 500
RULES = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
PASS = st.integers(min_value=0, max_value=2**50)
MS = st.integers(min_value=0, max_value=4 * 10**12)


def test_the_two_level_rotation_step(sql: Any) -> None:  # noqa: F811
    @RULES
    @given(PASS, st.integers(1, 1000), PASS, st.integers(1, 1000), PASS, PASS, PASS, PASS)
    def check(t_pass: int, t_weight: int, f_pass: int, f_weight: int, vtime: int, extra: int, t_vtime: int,
              t_extra: int) -> None:
        tail, t_tail = vtime + extra, t_vtime + t_extra
        got = one(sql, "SELECT * FROM fairq_tenant_step(%(tp)s, %(tw)s, %(fp)s, %(fw)s, %(v)s, %(t)s, %(tv)s, %(tt)s)",
                  {"tp": t_pass, "tw": t_weight, "fp": f_pass, "fw": f_weight, "v": vtime, "t": tail,
                   "tv": t_vtime, "tt": t_tail})
        want = tenant_step(t_pass, t_weight, f_pass, f_weight, vtime=vtime, tail=tail, tenant_vtime=t_vtime,
                           tenant_tail=t_tail)
        assert tuple(got) == (*want.tenant, *want.flow)

    check()


def test_a_buckets_level_and_when_its_next_token_is_there(sql: Any) -> None:  # noqa: F811
    @RULES
    @given(st.integers(0, 100_000), st.integers(0, 5000), st.one_of(st.none(), st.integers(0, 6_000_000)), MS, MS)
    def check(rate: int, burst: int, tokens: int | None, at_ms: int, now_ms: int) -> None:
        try:
            Bucket.full(burst, now_ms).level(now_ms, rate, burst)
        except InvalidInput:
            return  # a pair no tenant can be given
        bucket = Bucket(min(tokens, burst * 1000 + 999), at_ms) if tokens is not None else None
        held = bucket if bucket is not None else Bucket.full(burst, now_ms)
        got = one(sql, "SELECT fairq_bucket_level(%(k)s, %(a)s, %(n)s, %(r)s, %(b)s), "
                       "fairq_bucket_ready_at(%(k)s, %(a)s, %(n)s, %(r)s, %(b)s)",
                  {"k": None if bucket is None else bucket.tokens_milli, "a": None if bucket is None else at_ms,
                   "n": now_ms, "r": rate, "b": burst})
        assert tuple(got) == (held.level(now_ms, rate, burst), held.ready_at(now_ms, rate, burst))

    check()
