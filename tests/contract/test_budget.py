"""Attempts count durable claims; backoff is bounded and replays exactly."""

from __future__ import annotations

import pytest

import fairq


def test_a_retrying_head_is_due_at_2_then_6_and_b_proceeds_at_0(q: fairq.Queue) -> None:
    q.enqueue("A1", {}, flow="A", now=0)
    q.enqueue("B1", {}, flow="B", now=0)
    a1 = q.claim(now=0)
    assert q.retry(a1, "unavailable", now=0).next_at == 2
    b1 = q.claim(now=0)
    assert b1.event_id == "B1"  # B does not wait with A
    q.ack(b1, now=0)
    assert q.claim(now=1) is None
    a1 = q.claim(now=2)
    assert (a1.event_id, a1.attempts) == ("A1", 2)
    assert q.retry(a1, "unavailable", now=2).next_at == 6
    assert q.claim(now=5) is None
    a1 = q.claim(now=6)
    settled = q.retry(a1, "unavailable", now=6)
    # The third failure spends the round's budget of three claims.
    assert settled.state is fairq.State.QUARANTINED and settled.attempts == 3
    assert q.claim(now=100) is None
    actions = [(a.action, a.detail.get("cause")) for a in q.audit("A1")]
    assert actions == [("retry", None), ("retry", None), ("quarantine", "attempts_exhausted")]


def test_claims_whose_worker_died_count_against_the_budget(q: fairq.Queue) -> None:
    q.enqueue("E3", {}, now=0)
    for t in (0, 5, 10):  # three holders die without settling
        lease = q.claim(now=t)
        assert lease.attempts == t // 5 + 1
    # The next claim finds the third lease expired with the budget spent.
    assert q.claim(now=15) is None
    info = q.get("E3")
    assert info.state is fairq.State.QUARANTINED and info.attempts == 3
    assert "retry budget spent" in info.reason
    assert [a.action for a in q.audit("E3")] == ["expired", "expired", "quarantine"]


def test_quarantining_a_spent_head_does_not_stop_the_claim_from_serving_others(q: fairq.Queue) -> None:
    q.enqueue("dead", {}, flow="A", now=0)
    for t in (0, 5, 10):
        assert q.claim(now=t).event_id == "dead"  # each holder dies
    q.enqueue("live", {}, flow="B", now=12)
    # One claim quarantines the spent head and still hands out B's event.
    lease = q.claim(now=15)
    assert lease is not None and lease.event_id == "live"
    assert q.get("dead").state is fairq.State.QUARANTINED


def test_backoff_is_capped() -> None:
    b = fairq.Backoff(base=1, factor=10, cap=30, jitter=False)
    assert [b.delay("e", 1, n) for n in (1, 2, 3, 4, 50, 5000)] == [1, 10, 30, 30, 30, 30]


def test_jitter_is_deterministic_per_event_generation_and_attempt() -> None:
    b = fairq.Backoff(base=8, factor=2, cap=300, jitter=True)
    first = [b.delay("evt", 3, n) for n in range(1, 6)]
    assert first == [b.delay("evt", 3, n) for n in range(1, 6)]
    for n, d in enumerate(first, start=1):
        full = min(300, 8 * 2 ** (n - 1))
        assert full / 2 <= d < full
    others = {b.delay(f"evt{i}", 3, 1) for i in range(50)}
    assert len(others) > 40  # different events spread out


def test_a_retry_with_an_explicit_delay_overrides_the_backoff(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=0)
    lease = q.claim(now=0)
    assert q.retry(lease, "later", delay=42, now=0).next_at == 42


def test_fail_quarantines_at_once_whatever_the_budget(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=0)
    settled = q.fail(q.claim(now=0), "invalid_payload", now=0)
    assert settled.state is fairq.State.QUARANTINED and settled.attempts == 1
    info = q.get("x")
    assert info.reason == "invalid_payload"
    assert q.audit("x")[0].detail["cause"] == "fail"


@pytest.mark.parametrize("max_attempts", [1, 2, 5])
def test_the_round_budget_is_max_attempts_claims(make_queue, max_attempts: int) -> None:
    q = make_queue(max_attempts=max_attempts, backoff=fairq.Backoff(base=0, jitter=False))
    q.enqueue("x", {}, now=0)
    claims = 0
    while (lease := q.claim(now=0)) is not None:
        claims += 1
        q.retry(lease, "no", now=0)
    assert claims == max_attempts
    assert q.get("x").state is fairq.State.QUARANTINED


def test_a_released_lease_is_ready_at_once_and_does_not_spend_the_budget(make_queue) -> None:
    q = make_queue(max_attempts=1)
    q.enqueue("x", {}, flow="F", now=0)
    q.enqueue("y", {}, flow="F", now=0)
    lease = q.claim(now=0)
    settled = q.release(lease, now=1)
    assert (settled.state, settled.next_at, settled.attempts) == (fairq.State.READY, 1.0, 0)
    info = q.get("x")
    assert (info.attempts, info.lifetime_attempts) == (0, 1)
    # With max_attempts=1 a retry would have quarantined it; after a release
    # the next holder still has its one attempt, and order is kept.
    again = q.claim(now=1)
    assert again.event_id == "x" and again.generation == 2
    with pytest.raises(fairq.StaleLease):
        q.ack(lease, now=1)
    assert q.ack(again, now=1).state is fairq.State.ACKED
    assert q.audit("x") == []


def test_release_takes_no_reason_or_delay(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=0)
    lease = q.claim(now=0)
    for kwargs, field in (({"reason": "why"}, "reason"), ({"delay": 1}, "delay")):
        with pytest.raises(fairq.InvalidInput) as info:
            q.release(lease, now=0, **kwargs)
        assert info.value.field == field
