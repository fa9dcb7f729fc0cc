"""Redrive: an explicit, audited decision that gives a quarantined event a new round."""

from __future__ import annotations

import pytest

import fairq


@pytest.fixture
def quarantined(q: fairq.Queue) -> fairq.EventInfo:
    q.enqueue("A1", {"delta": 10}, flow="A", now=0)
    q.fail(q.claim(now=0), "unsupported_delta", now=0)
    return q.get("A1")


def test_redrive_resets_attempts_keeps_lifetime_and_moves_the_generation(q, quarantined) -> None:
    gen = q.redrive("A1", expected_generation=quarantined.generation, reason="cap raised", now=1)
    info = q.get("A1")
    assert gen == quarantined.generation + 1 == info.generation
    assert info.state is fairq.State.READY and info.attempts == 0 and info.lifetime_attempts == 1
    assert info.reason is None  # the old reason moved to the audit row
    lease = q.claim(now=1)
    assert (lease.event_id, lease.attempts, lease.lifetime_attempts) == ("A1", 1, 2)


def test_the_audit_row_keeps_who_why_and_the_reason_it_replaced(q, quarantined) -> None:
    q.redrive("A1", expected_generation=1, reason="cap raised", actor="alice", now=3)
    entry = q.audit("A1")[-1]
    assert (entry.action, entry.reason, entry.actor, entry.generation, entry.at) == \
        ("redrive", "cap raised", "alice", 2, 3.0)
    assert entry.detail == {"replaced_reason": "unsupported_delta", "attempts": 1, "lifetime_attempts": 1}


def test_redrive_with_a_stale_expected_generation_is_refused(q, quarantined) -> None:
    q.redrive("A1", expected_generation=1, reason="first operator", now=1)
    with pytest.raises(fairq.RedriveRefused) as info:
        q.redrive("A1", expected_generation=1, reason="second operator", now=1)
    assert info.value.event_id == "A1"
    assert [a.action for a in q.audit("A1")].count("redrive") == 1


@pytest.mark.parametrize("state", ["ready", "inflight", "acked"])
def test_only_a_quarantined_event_can_be_redriven(q: fairq.Queue, state: str) -> None:
    q.enqueue("x", {}, now=0)
    generation = 0
    if state != "ready":
        lease = q.claim(now=0)
        generation = lease.generation
        if state == "acked":
            q.ack(lease, now=0)
    with pytest.raises(fairq.RedriveRefused, match=state):
        q.redrive("x", expected_generation=generation, reason="why not", now=1)
    assert q.audit("x") == []


def test_redrive_of_an_unknown_event_is_refused(q: fairq.Queue) -> None:
    with pytest.raises(fairq.RedriveRefused, match="does not exist"):
        q.redrive("ghost", expected_generation=0, reason="x", now=0)


@pytest.mark.parametrize("reason", ["", "   ", "\n\t", None])
def test_redrive_needs_a_real_reason(q, quarantined, reason) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        q.redrive("A1", expected_generation=1, reason=reason, now=1)
    assert info.value.field == "reason"
    assert q.get("A1").state is fairq.State.QUARANTINED


def test_a_holder_from_before_the_quarantine_cannot_settle_after_redrive(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=0)
    lease = q.claim(now=0)
    q.fail(lease, "broken", now=0)
    q.redrive("x", expected_generation=lease.generation, reason="fixed", now=1)
    with pytest.raises(fairq.StaleLease):
        q.ack(lease, now=1)
