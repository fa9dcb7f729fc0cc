"""A claim takes a turn when it is made; weights; new flows join behind."""

from __future__ import annotations

import pytest

import fairq
from helpers import drain_order


def enqueue_flows(q: fairq.Queue, flows: str, per_flow: int, *, now: float = 0) -> None:
    for flow in flows:
        for i in range(1, per_flow + 1):
            q.enqueue(f"{flow}{i}", {"delta": i}, flow=flow, now=now)


def test_nine_claims_rotate_a1_b1_c1_a2_b2_c2_a3_b3_c3(q: fairq.Queue) -> None:
    enqueue_flows(q, "ABC", 3)
    assert drain_order(q, now=0) == ["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"]


def test_rotation_does_not_depend_on_the_order_events_were_enqueued_within_flows(q: fairq.Queue) -> None:
    for i in range(1, 4):
        for flow in "ABC":
            q.enqueue(f"{flow}{i}", {"i": i}, flow=flow, now=0)
    assert drain_order(q, now=0) == ["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"]


def test_a_failing_head_takes_its_turn_and_goes_to_the_back(q: fairq.Queue) -> None:
    enqueue_flows(q, "ABC", 2)
    order = []
    for _ in range(5):
        lease = q.claim(now=0)
        assert lease is not None
        order.append(lease.event_id)
        if lease.flow == "A":
            q.retry(lease, "unavailable", delay=0, now=0)  # fails at once, claimable at once
        else:
            q.ack(lease, now=0)
    # A1 fails every time it is claimed, yet B and C each get a turn in between.
    assert order == ["A1", "B1", "C1", "A1", "B2"]


def test_a_stream_of_new_flows_cannot_starve_an_old_flow(q: fairq.Queue) -> None:
    for i in range(1, 41):
        q.enqueue(f"A{i}", {}, flow="A", now=0)
    a_claims = []  # (claim number, flows waiting besides A at that moment)
    for i in range(200):
        # Before every claim a brand-new flow arrives with one event: the
        # arrival rate equals the service rate, so the backlog keeps growing.
        q.enqueue(f"new{i}", {}, flow=f"new-flow-{i}", now=0)
        lease = q.claim(now=0)
        assert lease is not None
        if lease.flow == "A":
            a_claims.append((i, q.stats(now=0).flows - 1))
        q.ack(lease, now=0)
    # A relay that always serves new flows first would serve A once. Here A
    # is served again and again, and between two of its claims each flow that
    # was already waiting gets at most one turn: newcomers queue behind A.
    assert len(a_claims) >= 10
    for (at, waiting), (next_at, _) in zip(a_claims, a_claims[1:]):
        assert next_at - at <= waiting + 1, (at, waiting, next_at)


def test_new_flows_created_one_by_one_queue_behind_an_old_flow(q: fairq.Queue) -> None:
    enqueue_flows(q, "A", 3)
    order = []
    for newcomer in [None, "B", "C", "D"]:
        if newcomer is not None:
            q.enqueue(f"{newcomer}1", {}, flow=newcomer, now=0)
        lease = q.claim(now=0)
        assert lease is not None
        order.append(lease.event_id)
        q.ack(lease, now=0)
    order += drain_order(q, now=0)
    # New-flows-first would give B1, C1, D1 all before A2; here A keeps its place.
    assert order == ["A1", "A2", "B1", "A3", "C1", "D1"]


def test_weights_split_claims_in_proportion_within_one_claim(q: fairq.Queue) -> None:
    q.set_weight("heavy", 3)
    enqueue_flows_named(q, {"heavy": 60, "light": 60})
    claimed = []
    for _ in range(80):
        lease = q.claim(now=0)
        assert lease is not None
        claimed.append(lease.flow)
        q.ack(lease, now=0)
    assert claimed.count("heavy") == 60 and claimed.count("light") == 20
    for n in range(1, 81):
        prefix = claimed[:n]
        assert abs(prefix.count("heavy") - n * 3 / 4) <= 1, (n, prefix)
        assert abs(prefix.count("light") - n * 1 / 4) <= 1, (n, prefix)


@pytest.mark.parametrize("weights", [(5, 2, 1), (7, 3, 2, 1, 1), (2, 3, 5, 7, 11), (1000, 999, 3)])
def test_any_two_busy_flows_stay_within_one_claim_of_their_weights(q: fairq.Queue, weights) -> None:
    # The bound fairq promises: for flows f, g whose heads stay claimable,
    # after every claim |claims_f / w_f - claims_g / w_g| <= max(1/w_f, 1/w_g).
    names = {f"w{i}": w for i, w in enumerate(weights)}
    for flow, weight in names.items():
        q.set_weight(flow, weight)
    total = 300
    enqueue_flows_named(q, {flow: total for flow in names})
    counts = dict.fromkeys(names, 0)
    for _ in range(total):
        lease = q.claim(now=0)
        assert lease is not None
        counts[lease.flow] += 1
        q.ack(lease, now=0)
        for f, wf in names.items():
            for g, wg in names.items():
                gap = abs(counts[f] / wf - counts[g] / wg)
                assert gap <= max(1 / wf, 1 / wg) + 1e-9, (counts, f, g)


def test_set_weight_is_allowed_before_the_flow_has_any_event_and_keeps_the_clock(q: fairq.Queue) -> None:
    q.enqueue("x", {}, now=10)
    q.set_weight("future", 7)
    assert q.events(flow="future") == []
    # The clock was not moved by configuration: an explicit time of 10 is still fine.
    q.enqueue("f1", {}, flow="future", now=10)
    assert q.get("f1").state is fairq.State.READY


def test_claim_many_takes_at_most_one_head_per_flow_in_fair_order(q: fairq.Queue) -> None:
    enqueue_flows(q, "ABCD", 3)
    first = q.claim_many(3, now=0)
    assert [lease.event_id for lease in first] == ["A1", "B1", "C1"]
    second = q.claim_many(10, now=0)
    assert [lease.event_id for lease in second] == ["D1"]  # A, B, C are leased
    for lease in first + second:
        q.ack(lease, now=0)
    assert [lease.event_id for lease in q.claim_many(10, now=0)] == ["A2", "B2", "C2", "D2"]


def test_claim_many_serves_every_flow_in_seq_order_like_single_claims(make_queue, store) -> None:
    def run(batch: bool) -> list[str]:
        q = make_queue(at=store.target(f"q{batch}"), max_attempts=3)
        q.set_weight("B", 2)
        for flow in "ABCDE":
            for i in range(4):
                q.enqueue(f"{flow}{i}", {}, flow=flow, now=0)
        order: list[str] = []
        while True:
            leases = q.claim_many(3, now=0) if batch else [x for x in [q.claim(now=0)] if x]
            if not leases:
                break
            order += [lease.event_id for lease in leases]
            for lease in leases:
                q.ack(lease, now=0)
        q.close()
        return order

    singles = run(False)
    assert len(singles) == 20
    # Batches of 3 can't contain two heads of one flow, so only compare fairness:
    # every flow's events come out in seq order and every flow is served.
    batched = run(True)
    assert sorted(batched) == sorted(singles)
    for flow in "ABCDE":
        assert [e for e in batched if e[0] == flow] == [f"{flow}{i}" for i in range(4)]


def test_a_flow_back_from_backoff_is_served_before_flows_that_had_more_turns(q: fairq.Queue) -> None:
    enqueue_flows(q, "ABC", 4)
    a1 = q.claim(now=0)
    assert a1 is not None and a1.event_id == "A1"
    q.retry(a1, "unavailable", now=0)  # backoff 2: due at t=2
    assert drain_order(q, now=0, limit=6) == ["B1", "C1", "B2", "C2", "B3", "C3"]
    # At t=2 A has had one turn, B and C three each: A goes first.
    lease = q.claim(now=2)
    assert lease is not None and lease.event_id == "A1"


def test_unordered_events_each_form_their_own_flow_and_run_concurrently(q: fairq.Queue) -> None:
    for i in range(3):
        q.enqueue(f"u{i}", {"i": i}, now=0)
    leases = q.claim_many(5, now=0)
    assert [lease.event_id for lease in leases] == ["u0", "u1", "u2"]
    assert all(lease.flow is None and lease.seq == 1 for lease in leases)


def enqueue_flows_named(q: fairq.Queue, sizes: dict[str, int]) -> None:
    for flow, size in sizes.items():
        q.enqueue_many([(f"{flow}-{i}", {}, flow) for i in range(size)], now=0)
