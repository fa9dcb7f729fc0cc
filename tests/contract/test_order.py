"""Nothing overtakes a flow's head."""

from __future__ import annotations

import fairq


def setup_two_flows(q: fairq.Queue) -> None:
    for i in (1, 2, 3):
        q.enqueue(f"A{i}", {"i": i}, flow="A", now=0)
    q.enqueue("B1", {}, flow="B", now=0)


def test_a_quarantined_head_keeps_blocking_its_flow(q: fairq.Queue) -> None:
    setup_two_flows(q)
    a1 = q.claim(now=0)
    q.fail(a1, "id_conflict", now=0)
    later = [lease.event_id for lease in q.claim_many(10, now=100)]
    assert later == ["B1"]  # A2 does not become a fake head
    assert q.get("A2").state is fairq.State.READY


def test_a_head_in_backoff_is_not_overtaken_by_the_next_seq(q: fairq.Queue) -> None:
    setup_two_flows(q)
    a1 = q.claim(now=0)
    q.retry(a1, "unavailable", now=0)  # due at 2
    assert [lease.event_id for lease in q.claim_many(10, now=1)] == ["B1"]
    lease = q.claim(now=2)
    assert lease.event_id == "A1"


def test_a_head_under_a_live_lease_is_not_overtaken(q: fairq.Queue) -> None:
    setup_two_flows(q)
    a1 = q.claim(now=0)
    assert a1.event_id == "A1"
    assert [lease.event_id for lease in q.claim_many(10, now=4.999)] == ["B1"]
    # Once the lease is over, the same head is claimed again, not A2.
    again = q.claim(now=5)
    assert again.event_id == "A1" and again.generation == 2


def test_flow_events_are_handled_in_seq_order_one_at_a_time(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {"i": i}, "F") for i in range(1, 21)], now=0)
    seen = []
    while (lease := q.claim(now=0)) is not None:
        assert q.claim(now=0) is None  # the flow's one head is leased
        seen.append(lease.seq)
        q.ack(lease, now=0)
    assert seen == list(range(1, 21))


def test_a_delayed_event_holds_back_the_events_behind_it(q: fairq.Queue) -> None:
    q.enqueue("late", {}, flow="F", delay=10, now=0)
    q.enqueue("next", {}, flow="F", now=0)
    assert q.claim(now=9) is None
    assert q.claim(now=10).event_id == "late"
