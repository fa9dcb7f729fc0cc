"""An operator's decisions on the record: discard an event (its flow goes on
after it), pause and resume a flow; counts that say what is blocked. Every
store, through the public API."""

from __future__ import annotations

import pytest

import fairq
from helpers import drain_order


def quarantine_head(q: fairq.Queue, flow: str = "A") -> fairq.Lease:
    lease = q.claim(now=0)
    assert lease is not None and lease.flow == flow
    q.fail(lease, "poison", now=0)
    return lease


# -- discard ---------------------------------------------------------------------------------------


def test_discarding_a_quarantined_head_lets_its_flow_move_on_on_the_record(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("a3", {}, "A")], now=0)
    lease = quarantine_head(q)
    assert q.claim(now=0) is None  # blocked behind the quarantined head
    generation = q.discard("a1", expected_generation=lease.generation, reason="bad sku, refunded",
                           actor="ops", now=1)
    assert generation == lease.generation + 1
    info = q.get("a1")
    assert info is not None and info.state is fairq.State.DISCARDED and info.generation == generation
    assert [e.event_id for e in q.events(state="discarded")] == ["a1"]
    [row] = [r for r in q.audit("a1") if r.action == "discard"]
    assert (row.reason, row.actor, row.generation) == ("bad sku, refunded", "ops", generation)
    assert row.detail["state"] == "quarantined"
    stats = q.stats(now=1)
    assert stats.counts["discarded"] == 1 and stats.totals["discarded"] == 1
    assert stats.counts["quarantined"] == 0
    assert drain_order(q, now=1) == ["a2", "a3"]


def test_a_ready_or_waiting_event_can_be_discarded_and_its_flow_skips_it(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("a3", {}, "A")], now=0)
    q.enqueue("b1", {}, flow="B", delay=60, now=0)
    assert q.discard("a2", expected_generation=0, reason="duplicate order", now=0) == 1  # behind the head
    assert q.discard("b1", expected_generation=0, reason="cancelled", now=0) == 1  # delayed
    assert drain_order(q, now=100) == ["a1", "a3"]
    assert q.why_blocked("B", now=100).why == "empty"


def test_a_backing_off_head_can_be_discarded(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    lease = q.claim(now=0)
    assert lease is not None
    q.retry(lease, "later", delay=60, now=0)
    assert q.why_blocked("A", now=0).why == "backing_off"
    q.discard("a1", expected_generation=lease.generation, reason="gave up", now=1)
    assert drain_order(q, now=1) == ["a2"]


def test_discard_is_fenced_and_a_refusal_changes_nothing(q: fairq.Queue, store, target) -> None:
    q.enqueue_many([("a1", {}, "A"), ("b1", {}, "B"), ("c1", {}, "C")], now=0)
    leased = q.claim(now=0)
    assert leased is not None and leased.event_id == "a1"
    done = q.claim(now=0)
    assert done is not None
    q.ack(done, now=0)
    before = store.snapshot(target)
    with pytest.raises(fairq.RedriveRefused, match="inflight") as info:
        q.discard("a1", expected_generation=leased.generation, reason="x", now=0)
    assert "settled" in str(info.value)  # it says what to do
    with pytest.raises(fairq.RedriveRefused, match="generation"):
        q.discard("c1", expected_generation=5, reason="x", now=0)
    with pytest.raises(fairq.RedriveRefused, match="acked"):
        q.discard(done.event_id, expected_generation=done.generation, reason="x", now=0)
    with pytest.raises(fairq.RedriveRefused):
        q.discard("nope", expected_generation=0, reason="x", now=0)
    assert store.snapshot(target) == before
    q.discard("c1", expected_generation=0, reason="x", now=0)
    with pytest.raises(fairq.RedriveRefused, match="discarded"):
        q.discard("c1", expected_generation=1, reason="again", now=0)


def test_discard_needs_a_reason(q: fairq.Queue, store, target) -> None:
    q.enqueue("a1", {}, flow="A", now=0)
    before = store.snapshot(target)
    for reason in [None, "", "   "]:
        with pytest.raises(fairq.InvalidInput) as info:
            q.discard("a1", expected_generation=0, reason=reason, now=0)  # type: ignore[arg-type]
        assert info.value.field == "reason"
    assert store.snapshot(target) == before


def test_discard_many_fences_each_item_alone(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("b1", {}, "B"), ("c1", {}, "C")], now=0)
    results = q.discard_many([("a1", 0), ("b1", 7), ("c1", 0)], reason="cleanup", actor="ops", now=0)
    assert results[0] == 1 and results[2] == 1
    assert isinstance(results[1], fairq.RedriveRefused)
    assert [e.event_id for e in q.events(state="discarded")] == ["a1", "c1"]
    assert drain_order(q, now=0) == ["b1"]


def test_a_discarded_event_is_purged_like_an_acked_one_and_its_id_stays_taken(q: fairq.Queue) -> None:
    q.enqueue("a1", {"n": 1}, flow="A", now=0)
    q.discard("a1", expected_generation=0, reason="not needed", now=0)
    purged = q.purge(acked_before=10, now=10)
    assert purged.events == 1
    assert q.get("a1") is None
    assert not q.enqueue("a1", {"n": 1}, flow="A", now=11).created  # a duplicate, not a new event


def test_discarding_a_tenants_head_lets_the_tenant_go_on(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A", "T"), ("a2", {}, "A", "T")], now=0)
    lease = quarantine_head(q)
    q.discard("a1", expected_generation=lease.generation, reason="poison", now=0)
    assert drain_order(q, now=0) == ["a2"]
    [t] = q.tenants(now=0)
    assert (t.ready, t.inflight) == (0, 0)


# -- pause and resume ----------------------------------------------------------------------------


def test_a_paused_flows_head_is_not_claimed_until_resumed(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("b1", {}, "B"), ("b2", {}, "B")], now=0)
    q.pause("A", reason="supplier outage", actor="ops", now=1)
    assert drain_order(q, now=2) == ["b1", "b2"]
    blocked = q.why_blocked("A", now=2)
    assert (blocked.why, blocked.actor, blocked.reason, blocked.until) == ("paused", "ops", "supplier outage", 1.0)
    assert "resume" in str(blocked)
    assert {f.name: f.paused for f in q.flows(now=2)} == {"A": True, "B": False}
    q.resume("A", reason="supplier back", actor="ops", now=3)
    assert drain_order(q, now=3) == ["a1", "a2"]
    actions = [(r.action, r.reason, r.actor, r.detail.get("flow")) for r in q.audit()
               if r.action in ("pause", "resume")]
    assert actions == [("pause", "supplier outage", "ops", "A"), ("resume", "supplier back", "ops", "A")]


def test_a_lease_held_when_its_flow_is_paused_runs_on_and_settles(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    lease = q.claim(now=0)
    assert lease is not None
    q.pause("A", reason="investigating", now=0)
    assert q.ack(lease, now=1).state is fairq.State.ACKED
    assert q.claim(now=1) is None  # the next head waits for the resume
    q.resume("A", now=2)
    assert drain_order(q, now=2) == ["a2"]


def test_a_flow_can_be_paused_before_its_first_event_and_twice_is_once(q: fairq.Queue) -> None:
    q.pause("later", reason="not yet", now=0)
    q.pause("later", reason="still not", now=0)
    q.enqueue("l1", {}, flow="later", now=0)
    assert q.claim(now=0) is None
    assert q.why_blocked("later", now=0).why == "paused"
    assert len([r for r in q.audit() if r.action == "pause"]) == 1
    q.resume("later", now=0)
    q.resume("later", now=0)
    assert len([r for r in q.audit() if r.action == "resume"]) == 1
    assert drain_order(q, now=0) == ["l1"]


def test_pause_needs_a_reason_and_a_flow_name(q: fairq.Queue, store, target) -> None:
    q.enqueue("a1", {}, flow="A", now=0)
    before = store.snapshot(target)
    with pytest.raises(fairq.InvalidInput) as info:
        q.pause("A", reason="", now=0)
    assert info.value.field == "reason"
    with pytest.raises(fairq.InvalidInput) as info:
        q.pause("", reason="x", now=0)
    assert info.value.field == "flow"
    assert store.snapshot(target) == before


def test_a_paused_tenants_flow_leaves_the_tenants_other_flows_going(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A", "T"), ("b1", {}, "B", "T"), ("b2", {}, "B", "T")], now=0)
    q.pause("A", reason="hold", now=0)
    assert drain_order(q, now=0) == ["b1", "b2"]
    q.resume("A", now=0)
    assert drain_order(q, now=0) == ["a1"]


# -- counts that tell the truth ----------------------------------------------------------------


def test_stats_say_what_a_claim_can_take_now_and_which_flows_wait_for_an_operator(q: fairq.Queue) -> None:
    q.enqueue_many([(f"a{i}", {}, "A") for i in range(1, 6)], now=0)
    q.enqueue_many([(f"b{i}", {}, "B") for i in range(1, 4)], now=0)
    q.enqueue_many([("c1", {}, "C"), ("d1", {}, "D")], now=0)
    q.enqueue("e1", {}, flow="E", delay=60, now=0)
    stats = q.stats(now=0)
    assert (stats.claimable_now, stats.blocked_flows) == (4, 0)  # A, B, C, D due; E delayed
    quarantine_head(q, "A")
    q.pause("B", reason="hold", now=0)
    stats = q.stats(now=0)
    assert stats.counts["ready"] == 4 + 3 + 2 + 1  # ready events behind blocked heads count too
    assert (stats.claimable_now, stats.blocked_flows) == (2, 2)  # C and D; A quarantined, B paused
