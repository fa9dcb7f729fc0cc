"""The queue's rules as pure functions: the fence verdict, the rotation step,
the settle decision, the repeat-enqueue check and what an expired lease
becomes. Every store calls these; here they are judged on plain values, with
no database. Property checks use plain random with fixed seeds."""

from __future__ import annotations

import math
import random

import pytest

from fairq import Backoff, Conflict, LeaseExpired, Outcome, StaleLease, State
from fairq.kernel.policy import (CLAIM_LAG_BUCKETS, MAX_WEIGHT, POLICY_ROW, STRIDE_UNIT, Decision, Policy, decide,
                                 policy_from_row, policy_params, stride)
from fairq.kernel.stats import assemble
from fairq.kernel.rules import Quarantine, body_hash, check_repeat, expired_lease_fate, fence, join_pass, rotate

NO_JITTER = Backoff(base=2.0, factor=2.0, cap=8.0, jitter=False)


# -- the fence -------------------------------------------------------------------


def live(now_ms: int = 1_000, **kw: object) -> StaleLease | LeaseExpired | None:
    """The verdict on lease ("E1", 3) against an inflight event at generation 3, lease end 2000."""
    args: dict[str, object] = {"state": "inflight", "stored_generation": 3, "lease_until_ms": 2_000}
    args.update(kw)
    return fence("E1", 3, now_ms, **args)  # type: ignore[arg-type]


def test_the_current_holder_may_act_before_its_lease_ends() -> None:
    assert live(now_ms=1_999) is None


def test_a_lease_is_expired_from_the_millisecond_its_end_is_reached() -> None:
    lost = live(now_ms=2_000)
    assert isinstance(lost, LeaseExpired)
    assert (lost.event_id, lost.generation) == ("E1", 3)


def test_a_lease_on_an_event_that_does_not_exist_is_stale() -> None:
    lost = live(state=None, stored_generation=None, lease_until_ms=None)
    assert isinstance(lost, StaleLease)
    assert "does not exist" in str(lost)


def test_a_lease_of_an_older_generation_is_stale_even_when_its_time_also_ran_out() -> None:
    lost = live(now_ms=5_000, stored_generation=4)
    assert isinstance(lost, StaleLease) and not isinstance(lost, LeaseExpired)
    assert "generation 4" in str(lost)


@pytest.mark.parametrize("state", ["ready", "acked", "quarantined"])
def test_a_lease_on_an_event_no_longer_inflight_is_stale(state: str) -> None:
    lost = live(state=state, lease_until_ms=None)
    assert isinstance(lost, StaleLease)
    assert state in str(lost)


def test_a_second_settle_of_one_event_in_a_batch_is_stale() -> None:
    assert isinstance(live(settled_in_batch=True), StaleLease)


def test_the_fence_admits_exactly_the_current_unexpired_unsettled_holder() -> None:
    rng = random.Random(7)
    for _ in range(5_000):
        state = rng.choice([None, "ready", "inflight", "acked", "quarantined"])
        stored = None if state is None else rng.randint(1, 4)
        until = rng.randint(0, 100) if state == "inflight" else None
        generation, now, settled = rng.randint(1, 4), rng.randint(0, 100), rng.random() < 0.2
        verdict = fence("E", generation, now, state=state, stored_generation=stored,
                        lease_until_ms=until, settled_in_batch=settled)
        admitted = (not settled and state == "inflight" and stored == generation
                    and until is not None and now < until)
        assert (verdict is None) == admitted
        if verdict is not None:
            assert isinstance(verdict, LeaseExpired) == (
                not settled and state == "inflight" and stored == generation)


# -- the rotation ----------------------------------------------------------------------


def test_a_claim_moves_a_flow_one_stride_past_its_pass() -> None:
    step = rotate(100, 4, vtime=50, tail=100)
    assert step.pass_ == 100 + STRIDE_UNIT // 4
    assert step.vtime == 100
    assert step.tail == step.pass_


def test_a_flow_that_sat_idle_starts_from_the_virtual_time_and_banks_no_turns() -> None:
    step = rotate(10, 1, vtime=5_000, tail=9_000)
    assert step.vtime == 5_000
    assert step.pass_ == 5_000 + STRIDE_UNIT


def test_the_tail_never_moves_back() -> None:
    step = rotate(0, 1, vtime=0, tail=10 * STRIDE_UNIT)
    assert step.tail == 10 * STRIDE_UNIT


def test_a_new_head_joins_behind_every_flow_at_the_tail() -> None:
    assert join_pass(12_345) == 12_345


def _simulate(weights: list[int], claims: int, rng: random.Random) -> list[list[int]]:
    """Claim `claims` times from always-backlogged flows as a store does:
    lowest (pass, turn) first, each claim taking rules.rotate's step.
    Returns the claim counts per flow after every claim."""
    vtime = tail = 0
    turn = 0
    heads = []  # [pass, turn, flow]
    for flow in rng.sample(range(len(weights)), len(weights)):  # joining order
        turn += 1
        heads.append([join_pass(tail), turn, flow])
    counts = [0] * len(weights)
    prefixes = []
    for _ in range(claims):
        head = min(heads)
        step = rotate(head[0], weights[head[2]], vtime=vtime, tail=tail)
        vtime, tail = step.vtime, step.tail
        turn += 1
        head[0], head[1] = step.pass_, turn
        counts[head[2]] += 1
        prefixes.append(list(counts))
    return prefixes


def test_every_prefix_of_claims_keeps_the_weighted_fairness_bound() -> None:
    # Weights whose stride is exact: |c_f/w_f - c_g/w_g| <= max(1/w_f, 1/w_g).
    exact = [w for w in range(1, MAX_WEIGHT + 1) if STRIDE_UNIT % w == 0]
    rng = random.Random(20_26)
    for _ in range(60):
        weights = [rng.choice(exact) for _ in range(rng.randint(2, 6))]
        for counts in _simulate(weights, 400, rng):
            for f, wf in enumerate(weights):
                for g, wg in enumerate(weights):
                    assert abs(counts[f] / wf - counts[g] / wg) <= max(1 / wf, 1 / wg) + 1e-12, (weights, counts)


def test_any_weights_get_claims_in_proportion_within_a_rounding_of_their_strides() -> None:
    # A stride rounds down by less than one unit, so a heavy flow is ahead by
    # at most claims * weight / STRIDE_UNIT beyond the exact bound.
    rng = random.Random(11)
    for _ in range(30):
        weights = [rng.randint(1, MAX_WEIGHT) for _ in range(rng.randint(2, 5))]
        prefixes = _simulate(weights, 300, rng)
        for n, counts in enumerate(prefixes, 1):
            for f, wf in enumerate(weights):
                for g, wg in enumerate(weights):
                    slack = n / STRIDE_UNIT
                    assert counts[f] / wf - counts[g] / wg <= max(1 / wf, 1 / wg) + slack, (weights, counts)


def test_a_heavier_weight_means_a_shorter_stride() -> None:
    assert [stride(w) for w in (1, 2, 3, 16)] == [STRIDE_UNIT, STRIDE_UNIT // 2, STRIDE_UNIT // 3, STRIDE_UNIT // 16]


# -- the settle decision -------------------------------------------------------------------


def settle(outcome: Outcome, attempts: int = 1, delay: float | None = None, max_attempts: int = 3) -> Decision:
    return decide(outcome, event_id="E1", generation=1, attempts=attempts, max_attempts=max_attempts,
                  now_ms=10_000, delay=delay, backoff=NO_JITTER)


def test_an_ack_is_final_and_keeps_the_attempt_count() -> None:
    d = settle(Outcome.ACK, attempts=2)
    assert (d.state, d.next_at_ms, d.quarantine_cause, d.attempts) == (State.ACKED, None, None, 2)


def test_a_release_is_ready_at_once_and_gives_the_claim_back() -> None:
    d = settle(Outcome.RELEASE, attempts=3)
    assert (d.state, d.next_at_ms, d.attempts) == (State.READY, 10_000, 2)


def test_a_fail_quarantines_even_with_budget_left() -> None:
    d = settle(Outcome.FAIL, attempts=1)
    assert (d.state, d.next_at_ms, d.quarantine_cause) == (State.QUARANTINED, None, "fail")


def test_a_retry_within_the_budget_waits_the_backoff_or_the_given_delay() -> None:
    assert settle(Outcome.RETRY, attempts=2).next_at_ms == 10_000 + 4_000
    assert settle(Outcome.RETRY, attempts=2, delay=0.5).next_at_ms == 10_500
    assert settle(Outcome.RETRY, attempts=2).state is State.READY


def test_a_retry_with_the_budget_spent_quarantines_as_attempts_exhausted() -> None:
    d = settle(Outcome.RETRY, attempts=3, max_attempts=3)
    assert (d.state, d.quarantine_cause) == (State.QUARANTINED, "attempts_exhausted")


def test_every_settle_decision_is_ready_no_earlier_than_now_or_has_no_next_time() -> None:
    rng = random.Random(3)
    for _ in range(2_000):
        outcome = rng.choice(list(Outcome))
        attempts, cap = rng.randint(1, 6), rng.randint(1, 6)
        delay = rng.choice([None, 0.0, rng.uniform(0, 100)])
        d = settle(outcome, attempts=attempts, delay=delay if outcome is Outcome.RETRY else None,
                   max_attempts=cap)
        if d.state is State.READY:
            assert d.next_at_ms is not None and d.next_at_ms >= 10_000
        else:
            assert d.next_at_ms is None
        assert (d.state is State.QUARANTINED) == (d.quarantine_cause is not None)


# -- repeat enqueues ---------------------------------------------------------------------------


def test_an_identical_repeat_is_accepted() -> None:
    check_repeat("E1", "A", '{"x":1}', stored_flow="A", stored_body='{"x":1}')
    check_repeat("E1", None, '{"x":1}', stored_flow=None, stored_body='{"x":1}')


def test_a_repeat_in_another_flow_conflicts_on_the_flow() -> None:
    with pytest.raises(Conflict) as caught:
        check_repeat("E1", "B", "1", stored_flow="A", stored_body="1")
    assert caught.value.field == "flow"
    assert "in flow 'A'" in str(caught.value) and "in flow 'B'" in str(caught.value)


def test_a_repeat_of_an_event_in_a_flow_of_its_own_names_that_in_the_conflict() -> None:
    with pytest.raises(Conflict) as caught:
        check_repeat("E1", "A", "1", stored_flow=None, stored_body="1")
    assert "in a flow of its own" in str(caught.value)


def test_a_repeat_with_another_body_conflicts_on_the_body() -> None:
    with pytest.raises(Conflict) as caught:
        check_repeat("E1", "A", "2", stored_flow="A", stored_body="1")
    assert caught.value.field == "body"


def test_a_repeat_of_a_purged_event_is_judged_by_its_tombstones_body_hash() -> None:
    check_repeat("E1", "A", '{"x":1}', stored_flow="A", stored_body=body_hash('{"x":1}'))
    with pytest.raises(Conflict) as caught:
        check_repeat("E1", "A", '{"x":2}', stored_flow="A", stored_body=body_hash('{"x":1}'))
    assert caught.value.field == "body"


def test_the_body_hash_is_sixteen_bytes_and_tells_bodies_apart() -> None:
    assert len(body_hash("1")) == 16
    assert body_hash("1") == body_hash("1") != body_hash("2")


# -- expired leases ---------------------------------------------------------------------------


def test_an_expired_lease_with_budget_left_is_claimed_again() -> None:
    assert expired_lease_fate(2, 3) is None


def test_an_expired_lease_that_spent_the_budget_is_quarantined() -> None:
    assert expired_lease_fate(3, 3) == Quarantine(
        "lease expired after attempt 3 of 3; retry budget spent", "attempts_exhausted")


def test_an_expired_lease_is_quarantined_exactly_when_its_attempts_reach_the_budget() -> None:
    for attempts in range(1, 10):
        for cap in range(1, 10):
            assert (expired_lease_fate(attempts, cap) is None) == (attempts < cap)


# -- the stored policy row, and stats from what a store keeps ------------------------------------


def test_a_policy_row_written_from_a_policy_reads_back_as_the_same_policy() -> None:
    policy = Policy(7, Backoff(0.5, 3.0, 90.0, jitter=False), 12.5, version=4)
    params = policy_params(policy)
    row = tuple(params[k] for k in ("max_attempts", "lease_ms", "base", "factor", "cap", "jitter")) + (4,)
    assert params["lease_ms"] == 12_500 and params["jitter"] is False
    back = policy_from_row(row)
    assert back == policy and back.version == 4
    # As SQLite keeps it: the flag an integer, the times as stored.
    assert policy_from_row((7, 12_500, 0.5, 3, 90, 0, 4)) == policy
    assert len(POLICY_ROW) == len(row)


def test_stats_from_kept_counts_fill_every_state_and_total_and_read_the_histogram() -> None:
    lags = [0] * CLAIM_LAG_BUCKETS
    lags[2] = 9  # nine first claims within 25 ms
    lags[-1] = 1  # one past the last bound
    got = assemble(now_ms=10_000, counts={"ready": 3}, totals={"acked": 2}, purged=1, lags=lags, flows=4,
                   oldest_ready_ms=7_500, top_flows=[("F", 3)], tombstones=5, claimable_now=2, blocked_flows=1)
    assert got.counts == {"ready": 3, "inflight": 0, "acked": 0, "quarantined": 0, "discarded": 0}
    assert got.totals["acked"] == 2 and got.totals["enqueued"] == 0 and got.totals["purged"] == 1
    assert list(got.totals)[-1] == "purged"
    assert (got.now, got.oldest_ready_age, got.flows, got.top_flows, got.tombstones) == (10.0, 2.5, 4, (("F", 3),), 5)
    assert got.claim_lag_median == 0.025 and got.claim_lag_p99 == math.inf
    assert (got.claimable_now, got.blocked_flows) == (2, 1)
    assert got.claim_lag_buckets[2] == (0.025, 9) and got.claim_lag_buckets[-1] == (math.inf, 1)
    idle = assemble(now_ms=0, counts={}, totals={}, purged=0, lags=[0] * CLAIM_LAG_BUCKETS, flows=0,
                    oldest_ready_ms=None, top_flows=[], tombstones=0, claimable_now=0, blocked_flows=0)
    assert idle.oldest_ready_age == 0.0 and idle.claim_lag_median is None
