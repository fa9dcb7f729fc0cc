"""stats(): counts, flows, ages, totals, claim lag and the biggest backlogs."""

from __future__ import annotations

import math

import fairq


def test_an_empty_queue_reports_every_state_as_zero(q: fairq.Queue) -> None:
    stats = q.stats(now=0)
    assert stats.counts == {"ready": 0, "inflight": 0, "acked": 0, "quarantined": 0, "discarded": 0}
    assert stats.flows == 0 and stats.oldest_ready_age == 0.0
    assert stats.claim_lag_median is None and stats.claim_lag_p99 is None
    assert set(stats.totals) == {"enqueued", "claimed", "expired", "acked", "retried", "quarantined",
                                 "redriven", "discarded", "purged"}
    assert all(n == 0 for n in stats.totals.values())


def test_counts_flows_and_totals_follow_every_transition(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("b1", {}, "B"), ("u", {})], now=0)
    a1 = q.claim(now=0)
    b1 = q.claim(now=0)
    u = q.claim(now=0)
    q.ack(a1, now=1)
    q.retry(b1, "later", now=1)
    q.fail(u, "broken", now=1)
    q.redrive("u", expected_generation=u.generation, reason="try again", now=2)
    q.claim(now=2)  # a2
    stats = q.stats(now=2)
    assert stats.counts == {"ready": 2, "inflight": 1, "acked": 1, "quarantined": 0, "discarded": 0}
    assert stats.flows == 3  # A (a2 inflight), B (b1 backing off), u
    assert stats.totals == {"enqueued": 4, "claimed": 4, "expired": 0, "acked": 1, "retried": 1,
                            "quarantined": 1, "redriven": 1, "discarded": 0, "purged": 0}


def test_a_quarantined_head_counts_as_a_blocked_flow(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    q.fail(q.claim(now=0), "bad", now=0)
    stats = q.stats(now=0)
    assert stats.flows == 1 and stats.counts["quarantined"] == 1 and stats.counts["ready"] == 1


def test_oldest_ready_age_is_the_longest_wait_of_a_claimable_head(q: fairq.Queue) -> None:
    q.enqueue("old", {}, flow="A", now=10)
    q.enqueue("new", {}, flow="B", now=14)
    q.enqueue("later", {}, flow="C", delay=100, now=14)
    assert q.stats(now=15).oldest_ready_age == 5.0
    q.claim(now=15)  # takes "old"
    assert q.stats(now=16).oldest_ready_age == 2.0


def test_claim_lag_is_measured_from_due_to_first_claim(q: fairq.Queue) -> None:
    # 98 events claimed 0.1 s after they were due, 2 claimed after 20 s.
    for i in range(100):
        q.enqueue(f"e{i}", {}, now=0)
    for i in range(98):
        q.ack(q.claim(now=0.1), now=0.1)
    late = q.claim_many(2, now=20)
    stats = q.stats(now=20)
    assert stats.claim_lag_median == 0.1  # the bucket "<= 100 ms"
    assert stats.claim_lag_p99 == 30.0  # the bucket "<= 30 s"
    assert sum(n for _, n in stats.claim_lag_buckets) == 100
    assert stats.claim_lag_buckets[-1][0] == math.inf
    # A second claim of the same event (retry) does not count again.
    q.retry(late[0], "again", delay=0, now=20)
    q.claim(now=21)
    assert sum(n for _, n in q.stats(now=21).claim_lag_buckets) == 100


def test_a_delayed_event_is_due_when_its_delay_ends(q: fairq.Queue) -> None:
    q.enqueue("x", {}, delay=60, now=0)
    q.claim(now=60.004)
    assert q.stats(now=61).claim_lag_median == 0.005


def test_top_flows_lists_the_largest_backlogs_first(q: fairq.Queue) -> None:
    q.enqueue_many([(f"a{i}", {}, "A") for i in range(5)] + [(f"b{i}", {}, "B") for i in range(2)]
                   + [(f"c{i}", {}, "C") for i in range(9)] + [("u", {})], now=0)
    q.ack(q.claim(now=0), now=0)  # one of A's
    assert q.stats(now=0, top=2).top_flows == (("C", 9), ("A", 4))
    assert q.stats(now=0).top_flows == (("C", 9), ("A", 4), ("B", 2))
