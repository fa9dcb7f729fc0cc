"""Retention: purge removes old acked events, tombstones keep enqueue idempotent, the window ends them.

The make_queue fixture re-checks every store invariant after each test,
including that purged events are a prefix of their flow.
"""

from __future__ import annotations


import pytest

import fairq

DAY = 86_400.0


def settled_mix(q: fairq.Queue) -> None:
    """Flow A: a1 a2 acked at 10, a3 acked at 50, a4 ready. Flow B: b1 quarantined, b2 ready.
    u1 acked at 10 (unordered), u2 inflight."""
    q.enqueue_many([("a1", {"n": 1}, "A"), ("a2", {"n": 2}, "A"), ("a3", {"n": 3}, "A"), ("a4", {"n": 4}, "A"),
                    ("b1", {}, "B"), ("b2", {}, "B"), ("u1", {"n": 1}), ("u2", {})], now=0)
    leases = {lease.event_id: lease for lease in q.claim_many(4, now=10, lease_seconds=1000)}
    assert set(leases) == {"a1", "b1", "u1", "u2"}
    q.settle_many([(leases["a1"], "ack"), (leases["b1"], "fail", "bad"), (leases["u1"], "ack")], now=10)
    q.ack(q.claim(now=10), now=10)  # a2
    q.ack(q.claim(now=50), now=50)  # a3


def test_purge_removes_only_acked_events_settled_before_the_cutoff(q: fairq.Queue) -> None:
    settled_mix(q)
    done = q.purge(acked_before=50, now=60)
    assert done == fairq.Purged(events=3, tombstones_dropped=0)
    assert [q.get(i) for i in ("a1", "a2", "u1")] == [None, None, None]
    assert q.get("a3").state is fairq.State.ACKED  # acked at 50: not before the cutoff
    assert q.get("a4").state is fairq.State.READY
    assert q.get("b1").state is fairq.State.QUARANTINED and q.get("b1").reason == "bad"
    assert q.get("u2").state is fairq.State.INFLIGHT
    stats = q.stats(now=60)
    assert stats.counts == {"ready": 2, "inflight": 1, "acked": 1, "quarantined": 1, "discarded": 0}
    assert stats.totals["purged"] == 3 and stats.totals["acked"] == 4 and stats.tombstones == 3


def test_a_purged_id_still_answers_existing_or_conflict(q: fairq.Queue) -> None:
    settled_mix(q)
    q.purge(acked_before=50, now=60)
    again = q.enqueue("a2", {"n": 2}, flow="A", now=61)
    assert again == fairq.Enqueued("a2", "A", 2, created=False)
    assert q.enqueue("u1", {"n": 1}, now=61) == fairq.Enqueued("u1", None, 1, created=False)
    with pytest.raises(fairq.Conflict) as body:
        q.enqueue("a2", {"n": 99}, flow="A", now=61)
    assert body.value.field == "body"
    with pytest.raises(fairq.Conflict) as flow:
        q.enqueue_many([("new", {}, "A"), ("a1", {"n": 1}, "B")], now=61)
    assert flow.value.field == "flow"
    assert q.get("new") is None  # the whole batch was refused
    assert q.stats(now=61).totals["enqueued"] == 8


def test_the_purged_flow_keeps_working(q: fairq.Queue) -> None:
    settled_mix(q)
    q.purge(acked_before=60, now=60)  # a1, a2, a3: all of A's acked prefix
    assert q.enqueue("a5", {}, flow="A", now=61).seq == 5
    assert [e.event_id for e in q.events(flow="A")] == ["a4", "a5"]
    assert q.claim(now=61).event_id == "a4"


def test_a_flow_purged_to_the_end_takes_new_events_as_its_head(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    q.ack(q.claim(now=0), now=0)
    q.ack(q.claim(now=0), now=0)
    q.purge(acked_before=1, now=1)
    assert q.enqueue("a3", {}, flow="A", now=2).seq == 3
    lease = q.claim(now=2)
    assert (lease.event_id, lease.seq) == ("a3", 3)


def test_tombstones_go_after_the_dedup_window_and_the_id_is_new_again(q: fairq.Queue) -> None:
    settled_mix(q)
    q.purge(acked_before=50, dedup_window=DAY, now=60)
    assert q.purge(acked_before=50, dedup_window=DAY, now=10 + DAY - 1).tombstones_dropped == 0
    assert q.purge(acked_before=50, dedup_window=DAY, now=10 + DAY + 1) == fairq.Purged(0, 3)
    assert q.stats(now=10 + DAY + 1).tombstones == 0
    fresh = q.enqueue("a1", {"other": True}, flow="A", now=10 + DAY + 2)
    assert fresh.created and fresh.seq == 5  # a new event at the end of its flow


def test_no_window_keeps_tombstones_forever(q: fairq.Queue) -> None:
    settled_mix(q)
    q.purge(acked_before=50, dedup_window=None, now=60)
    assert q.purge(acked_before=50, dedup_window=None, now=1000 * DAY).tombstones_dropped == 0
    assert not q.enqueue("a1", {"n": 1}, flow="A", now=1000 * DAY).created


def test_an_event_purged_at_once_past_the_window_leaves_no_tombstone(q: fairq.Queue) -> None:
    settled_mix(q)
    assert q.purge(acked_before=50, dedup_window=30, now=60) == fairq.Purged(3, 3)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_purging_in_small_chunks_gives_the_same_result(q: fairq.Queue, chunk) -> None:
    q.enqueue_many([(f"e{i}", {"i": i}, f"F{i % 3}") for i in range(20)], now=0)
    for _ in range(11):
        q.ack(q.claim(now=1), now=1)
    assert q.purge(acked_before=2, now=2, chunk=chunk).events == 11
    assert q.stats(now=2).counts["acked"] == 0 and q.stats(now=2).tombstones == 11


def test_an_explicit_time_before_the_clock_is_refused_before_anything_is_purged(q: fairq.Queue) -> None:
    settled_mix(q)
    with pytest.raises(fairq.ClockError):
        q.purge(acked_before=50, now=5)
    assert q.get("a1") is not None and q.stats(now=60).tombstones == 0


@pytest.mark.parametrize("kwargs, field", [
    ({"acked_before": -1}, "acked_before"),
    ({"acked_before": "yesterday"}, "acked_before"),
    ({"acked_before": 1, "dedup_window": -5}, "dedup_window"),
    ({"acked_before": 1, "chunk": 0}, "chunk"),
])
def test_bad_purge_arguments_name_their_field(q: fairq.Queue, kwargs, field) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        q.purge(**kwargs)
    assert info.value.field == field


