"""An event's kind and its own retry policy are stored with it: a claim hands
them to the holder, and every process judges the event by its own budget
and backoff (a settle's retry or quarantine, an expired lease at claim
time), whatever the queue's stored policy says; an event without them is
judged by the queue's, as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import fairq

Q = fairq.State.QUARANTINED


def test_an_event_with_its_own_budget_is_quarantined_after_it_in_every_process(
        store: Any, target: Any, make_queue: Callable[..., fairq.Queue]) -> None:
    first = make_queue(max_attempts=5)
    first.enqueue("own", {}, kind="email", max_attempts=2, now=0)
    # Another process, opened without any policy of its own: the stored one (5).
    other = store.open(target, **store.DEFAULTS)
    assert other.policy().max_attempts == 5
    lease = first.claim(now=0)
    assert (lease.event_id, lease.kind) == ("own", "email")
    assert first.retry(lease, "flaky", now=0).state is fairq.State.READY
    lease = other.claim(now=100)
    assert (lease.event_id, lease.attempts) == ("own", 2)
    settled = other.retry(lease, "flaky", now=100)
    assert (settled.state, settled.attempts) == (Q, 2)
    info = first.get("own")
    assert (info.state, info.attempts, info.max_attempts) == (Q, 2, 2)
    assert first.audit("own")[-1].detail["cause"] == "attempts_exhausted"
    # An event without a budget of its own still has the queue's five claims.
    other.enqueue("plain", {}, now=150)
    for t in (200, 300, 400, 500):
        lease = other.claim(now=t)
        assert lease.event_id == "plain"
        assert other.retry(lease, "flaky", now=t).state is fairq.State.READY
    assert first.retry(first.claim(now=600), "flaky", now=600).state is Q


def test_a_budget_larger_than_the_queues_gives_more_claims(q: fairq.Queue) -> None:
    q.enqueue("big", {}, max_attempts=4, now=0)  # the queue's budget is 3
    for t in (0, 10, 20):
        assert q.retry(q.claim(now=t), "again", now=t).state is fairq.State.READY
    assert q.retry(q.claim(now=30), "again", now=30).attempts == 4
    assert q.get("big").state is Q


def test_an_events_own_backoff_sets_its_next_time(q: fairq.Queue) -> None:
    # The queue's backoff is 2, 4, 8 s; each event's own is used instead.
    q.enqueue("obj", {}, flow="A", max_attempts=10, backoff=fairq.Backoff(base=7, factor=3, cap=50, jitter=False),
              now=0)
    q.enqueue("dict", {}, flow="B", max_attempts=10, backoff={"base": 0.5, "factor": 1, "jitter": False}, now=0)
    q.enqueue("plain", {}, flow="C", now=0)
    nexts = {lease.event_id: q.retry(lease, "slow", now=0).next_at for lease in q.claim_many(3, now=0)}
    assert nexts == {"obj": 7, "dict": 0.5, "plain": 2}
    leases = {lease.event_id: lease for lease in q.claim_many(3, now=7)}
    q.settle_many([(leases["dict"], "ack"), (leases["plain"], "ack")], now=7)
    assert q.retry(leases["obj"], "slow", now=7).next_at == 7 + 21
    assert q.retry(q.claim(now=28), "slow", now=28).next_at == 28 + 50  # capped


def test_an_events_own_jittered_backoff_replays_as_backoff_delay_says(q: fairq.Queue) -> None:
    own = fairq.Backoff(base=10, factor=2, cap=100, jitter=True)  # the queue's has no jitter
    q.enqueue("j", {}, max_attempts=5, backoff=own, now=0)
    lease = q.claim(now=0)
    settled = q.retry(lease, "slow", now=0)
    wait = own.delay("j", lease.generation, lease.attempts)
    assert 5 <= wait < 10 and settled.next_at == round(wait * 1000) / 1000


def test_expired_leases_count_against_the_events_own_budget(q: fairq.Queue) -> None:
    q.enqueue("short", {}, kind="import", max_attempts=2, now=0)
    q.enqueue("long", {}, max_attempts=4, now=0)
    assert {lease.event_id for lease in q.claim_many(2, now=0)} == {"short", "long"}
    # Both holders die; the leases (5 s) expire and the events are claimed again.
    assert {lease.event_id for lease in q.claim_many(2, now=5)} == {"short", "long"}
    # The second lease of "short" expires with its budget of 2 spent; "long"
    # (4, above the queue's 3) is claimed a third and a fourth time.
    assert [lease.event_id for lease in q.claim_many(2, now=10)] == ["long"]
    info = q.get("short")
    assert info.state is Q and "attempt 2 of 2" in info.reason and info.kind == "import"
    assert [lease.attempts for lease in q.claim_many(2, now=15)] == [4]
    assert q.claim(now=20) is None and q.get("long").state is Q


def test_a_lease_and_get_carry_the_kind_and_timeout_and_extend_keeps_them(q: fairq.Queue) -> None:
    q.enqueue("t", {"to": "a@b"}, kind="send_email", max_attempts=7, timeout=2.5, now=0)
    q.enqueue("u", {}, now=0)
    info = q.get("t")
    assert (info.kind, info.max_attempts, info.timeout) == ("send_email", 7, 2.5)
    assert (q.get("u").kind, q.get("u").max_attempts, q.get("u").timeout) == (None, None, None)
    leases = {lease.event_id: lease for lease in q.claim_many(2, now=0)}
    assert (leases["t"].kind, leases["t"].timeout) == ("send_email", 2.5)
    assert (leases["u"].kind, leases["u"].timeout) == (None, None)
    extended = q.extend(leases["t"], now=1)
    assert (extended.kind, extended.timeout, extended.lease_until) == ("send_email", 2.5, 6)


def test_events_lists_one_kind_with_state_flow_and_paging(q: fairq.Queue) -> None:
    q.enqueue_many([{"event_id": f"a{i}", "body": i, "kind": "a" if i % 2 else "b", "flow": "F" if i < 4 else None}
                    for i in range(8)], now=0)
    assert [e.event_id for e in q.events(kind="a")] == ["a1", "a3", "a5", "a7"]
    assert [e.event_id for e in q.events(kind="a", limit=2, after="a3")] == ["a5", "a7"]
    assert [e.event_id for e in q.events(kind="a", flow="F")] == ["a1", "a3"]
    lease = q.claim(now=0)
    q.fail(lease, "bad", now=0)
    assert [e.event_id for e in q.events(kind=lease.kind, state="quarantined")] == [lease.event_id]
    assert q.events(kind="nobody") == []
    assert len(q.events()) == 8


def test_an_id_repeated_with_another_kind_conflicts_and_writes_nothing(q: fairq.Queue) -> None:
    assert q.enqueue("x", {}, kind="a", now=0).created
    assert not q.enqueue("x", {}, kind="a", now=0).created
    with pytest.raises(fairq.Conflict) as caught:
        q.enqueue("x", {}, kind="b", now=0)
    assert caught.value.field == "kind" and "'a'" in str(caught.value)
    with pytest.raises(fairq.Conflict) as caught:
        q.enqueue("x", {}, now=0)
    assert caught.value.field == "kind"
    with pytest.raises(fairq.Conflict) as caught:
        q.enqueue_many([{"event_id": "y", "body": 1, "kind": "a"}, {"event_id": "y", "body": 1}], now=0)
    assert caught.value.field == "kind"
    with pytest.raises(fairq.Conflict):
        q.enqueue_many([{"event_id": "z", "body": 1}, {"event_id": "x", "body": {}, "kind": "c"}], now=0)
    assert q.get("y") is None and q.get("z") is None
    assert q.stats(now=0).counts["ready"] == 1


@pytest.mark.parametrize(("args", "field"), [
    ({"kind": ""}, "kind"), ({"kind": " "}, "kind"), ({"kind": "k" * 201}, "kind"), ({"kind": 3}, "kind"),
    ({"kind": "a\nb"}, "kind"), ({"max_attempts": 0}, "max_attempts"), ({"max_attempts": True}, "max_attempts"),
    ({"max_attempts": 2.0}, "max_attempts"), ({"timeout": 0}, "timeout"), ({"timeout": -1}, "timeout"),
    ({"timeout": "1"}, "timeout"), ({"backoff": 3}, "backoff"), ({"backoff": {"base": -1}}, "backoff.base"),
    ({"backoff": {"speed": 1}}, "backoff.speed"), ({"backoff": {"jitter": "yes"}}, "backoff.jitter"),
])
def test_a_bad_kind_or_policy_is_refused_naming_the_field_and_writes_nothing(
        q: fairq.Queue, args: dict[str, Any], field: str) -> None:
    with pytest.raises(fairq.InvalidInput) as caught:
        q.enqueue("e", {}, now=0, **args)
    assert caught.value.field == field
    with pytest.raises(fairq.InvalidInput) as caught:
        q.enqueue_many([{"event_id": "f", "body": {}}, {"event_id": "e", "body": {}, **args}], now=0)
    assert caught.value.field == f"items[1].{field}"
    assert q.get("e") is None and q.get("f") is None


def test_a_kind_of_200_printable_characters_is_stored_as_given(q: fairq.Queue) -> None:
    kind = "tâche.envoyer_" + "x" * 186
    q.enqueue("e", {}, kind=kind, now=0)
    assert len(kind) == 200 and q.get("e").kind == kind and q.claim(now=0).kind == kind
