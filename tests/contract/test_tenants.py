"""Tenants: claims rotate over tenants by weight, then over a tenant's flows by
weight, then strict order within a flow; a tenant's cap and token bucket hold
it back without losing its place. Every store, through the public API."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest

import fairq


def claim_ids(q: fairq.Queue, n: int, *, now: float = 0, ack: bool = True) -> list[str]:
    """n single claims (acked at once unless ack=False); the ids in claim order."""
    order = []
    for _ in range(n):
        lease = q.claim(now=now)
        assert lease is not None, f"nothing claimable after {order}"
        order.append(lease.event_id)
        if ack:
            q.ack(lease, now=now)
    return order


# -- enqueue ---------------------------------------------------------------------------------------


def test_a_tenant_is_created_by_its_first_event_and_lists_its_flows_and_ready_events(q: fairq.Queue) -> None:
    q.enqueue("a1", {}, flow="a", tenant="acme", now=0)
    q.enqueue("a2", {}, flow="a", tenant="acme", now=0)
    q.enqueue("b1", {}, flow="b", tenant="acme", now=0)
    q.enqueue("u1", {}, tenant="acme", now=0)  # an unordered event of the tenant
    q.enqueue("x1", {}, flow="x", now=0)  # no tenant: its own
    [acme] = q.tenants(now=0)
    assert (acme.name, acme.weight, acme.max_inflight, acme.rate, acme.burst) == ("acme", 1, 0, 0, 0)
    assert (acme.flows, acme.ready, acme.inflight, acme.tokens, acme.limited_by) == (2, 4, 0, None, None)
    flows = {f.name: f.tenant for f in q.flows(now=0)}
    assert flows == {"a": "acme", "b": "acme", "x": None}
    assert q.why_blocked("a", now=0).tenant == "acme"
    assert q.why_blocked("x", now=0).tenant is None


def test_a_flow_keeps_the_tenant_of_its_first_event(q: fairq.Queue, store, target) -> None:
    q.enqueue("a1", {}, flow="a", tenant="acme", now=0)
    q.enqueue("x1", {}, flow="x", now=0)
    before = store.snapshot(target)
    for flow, tenant in [("a", "globex"), ("a", None), ("x", "acme")]:
        with pytest.raises(fairq.Conflict) as info:
            q.enqueue("new", {}, flow=flow, tenant=tenant, now=0)
        assert info.value.field == "tenant"
    with pytest.raises(fairq.Conflict) as info:  # the whole batch is refused
        q.enqueue_many([("ok1", {}, "b", "acme"), ("bad", {}, "a", "globex")], now=0)
    assert info.value.field == "tenant"
    assert store.snapshot(target) == before


def test_a_repeated_id_must_repeat_its_tenant(q: fairq.Queue) -> None:
    assert q.enqueue("e1", {"n": 1}, tenant="acme", now=0).created
    assert not q.enqueue("e1", {"n": 1}, tenant="acme", now=0).created
    with pytest.raises(fairq.Conflict) as info:
        q.enqueue("e1", {"n": 1}, tenant="globex", now=0)
    assert info.value.field == "tenant"


def test_enqueue_many_takes_tenants_in_tuples_and_dicts(q: fairq.Queue) -> None:
    done = q.enqueue_many([("a1", {}, "a", "acme"), {"event_id": "b1", "body": {}, "flow": "b", "tenant": "acme"},
                           ("c1", {}, "c")], now=0)
    assert [e.created for e in done] == [True, True, True]
    assert {f.name: f.tenant for f in q.flows(now=0)} == {"a": "acme", "b": "acme", "c": None}


def test_jsonl_lines_take_a_tenant(q: fairq.Queue) -> None:
    lines = [{"event_id": "a1", "body": {}, "flow": "a", "tenant": "acme"},
             {"event_id": "b1", "body": {}, "flow": "b", "tenant": "globex"}]
    q.ingest(io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode()), now=0)
    assert [(t.name, t.flows) for t in q.tenants(now=0)] == [("acme", 1), ("globex", 1)]


def test_bad_tenant_names_are_refused_naming_the_field_and_nothing_is_written(q: fairq.Queue, store,
                                                                               target) -> None:
    before = store.snapshot(target)
    for bad in ["", 7, "tab\there", "t" * 256]:
        with pytest.raises(fairq.InvalidInput) as info:
            q.enqueue("e", {}, flow="f", tenant=bad, now=0)
        assert info.value.field == "tenant"
        with pytest.raises(fairq.InvalidInput) as info:
            q.set_tenant(bad, weight=2, now=0)
        assert info.value.field == "tenant"
    assert store.snapshot(target) == before


# -- two-level rotation ---------------------------------------------------------------------------


def test_tenants_take_turns_and_a_tenants_flows_take_turns_within_its_turns(q: fairq.Queue) -> None:
    for flow in "xyz":
        for i in (1, 2):
            q.enqueue(f"{flow}{i}", {}, flow=flow, tenant="A", now=0)
    for i in range(1, 7):
        q.enqueue(f"w{i}", {}, flow="w", tenant="B", now=0)
    assert claim_ids(q, 12) == ["x1", "w1", "y1", "w2", "z1", "w3", "x2", "w4", "y2", "w5", "z2", "w6"]


def test_a_flow_without_a_tenant_is_its_own_tenant_in_the_rotation(q: fairq.Queue) -> None:
    for flow in "xy":
        for i in (1, 2):
            q.enqueue(f"{flow}{i}", {}, flow=flow, tenant="A", now=0)
    for i in (1, 2):
        q.enqueue(f"u{i}", {}, flow="u", now=0)
    assert claim_ids(q, 6) == ["x1", "u1", "y1", "u2", "x2", "y2"]


def test_a_tenants_share_does_not_depend_on_its_number_of_flows(q: fairq.Queue) -> None:
    q.enqueue_many([(f"many-{f}-{i}", {}, f"many-{f}", "many") for f in range(10) for i in range(5)], now=0)
    q.enqueue_many([(f"one-{i}", {}, "one", "one") for i in range(50)], now=0)
    counts = Counter(e.split("-")[0] for e in claim_ids(q, 40))
    assert counts == {"many": 20, "one": 20}


def test_tenant_weights_split_claims_in_proportion(q: fairq.Queue) -> None:
    q.set_tenant("gold", weight=3, now=0)
    q.enqueue_many([(f"gold-{f}-{i}", {}, f"gold-{f}", "gold") for f in range(4) for i in range(30)], now=0)
    q.enqueue_many([(f"free-{i}", {}, "free", "free") for i in range(30)], now=0)
    order = claim_ids(q, 40)
    counts = Counter(e.split("-")[0] for e in order)
    assert counts == {"gold": 30, "free": 10}
    for n in range(1, 41):  # within one round at every prefix
        gold = sum(e.startswith("gold") for e in order[:n])
        assert abs(gold - n * 3 / 4) <= 1


def test_within_a_flow_of_a_tenant_order_is_strict_even_with_many_claims_at_once(q: fairq.Queue) -> None:
    q.enqueue_many([(f"a{i}", {}, "a", "T") for i in range(1, 6)], now=0)
    q.enqueue_many([(f"b{i}", {}, "b", "T") for i in range(1, 6)], now=0)
    leases = q.claim_many(10, now=0)
    assert sorted(lease.event_id for lease in leases) == ["a1", "b1"]  # one per flow
    for lease in leases:
        q.ack(lease, now=0)
    assert claim_ids(q, 8) == ["a2", "b2", "a3", "b3", "a4", "b4", "a5", "b5"]


def test_new_tenants_queue_behind_the_tenants_already_waiting(q: fairq.Queue) -> None:
    q.enqueue_many([(f"old{i}", {}, "old", "old") for i in range(1, 41)], now=0)
    old_claims = []  # (claim number, tenants waiting besides the old one at that moment)
    for i in range(150):
        # Before every claim a brand-new tenant arrives with one event: the
        # arrival rate equals the service rate, so the backlog keeps growing.
        q.enqueue(f"new{i}", {}, flow=f"new-flow-{i}", tenant=f"new-tenant-{i}", now=0)
        lease = q.claim(now=0)
        assert lease is not None
        if lease.event_id.startswith("old"):
            old_claims.append((i, sum(t.ready > 0 for t in q.tenants(limit=1000, now=0)) - 1))
        q.ack(lease, now=0)
    # Newest-first would serve the old tenant once. Here it is served again
    # and again, and between two of its claims each tenant that was already
    # waiting gets at most one turn: newcomers queue behind it.
    assert len(old_claims) >= 10
    for (at, waiting), (next_at, _) in zip(old_claims, old_claims[1:]):
        assert next_at - at <= waiting + 1, (at, waiting, next_at)


def test_a_tenant_that_went_idle_joins_behind_the_tenants_waiting(q: fairq.Queue) -> None:
    q.set_tenant("A", weight=3, now=0)  # A's turns are short: its pass stays low
    q.enqueue("a1", {}, flow="a", tenant="A", now=0)
    q.enqueue_many([(f"b{i}", {}, "b", "B") for i in range(1, 4)], now=0)
    assert claim_ids(q, 2) == ["a1", "b1"]
    # A had no event left: it comes back behind B (at the tail), not at the
    # low pass it left with, which would have banked it a turn.
    q.enqueue("a2", {}, flow="a", tenant="A", now=0)
    assert claim_ids(q, 3) == ["b2", "a2", "b3"]


# -- the cap ------------------------------------------------------------------------------------------


def test_max_inflight_caps_a_tenants_leases_and_others_go_on(q: fairq.Queue) -> None:
    q.set_tenant("A", max_inflight=2, now=0)
    q.enqueue_many([(f"a{f}", {}, f"a{f}", "A") for f in range(5)], now=0)
    q.enqueue_many([(f"b{i}", {}, "b", "B") for i in range(1, 4)], now=0)
    leases = [q.claim(now=0, lease_seconds=30) for _ in range(5)]
    held = [lease.event_id for lease in leases if lease is not None]
    assert held == ["a0", "b1", "a1"]  # A at its cap after two; B's flow is one at a time
    assert leases[3] is None and leases[4] is None
    [a, b] = q.tenants(now=0)
    assert (a.name, a.inflight, a.limited_by) == ("A", 2, "max_inflight")
    assert a.until == 30.0  # the earliest end among its leases
    blocked = q.why_blocked("a2", now=0)
    assert (blocked.why, blocked.tenant, blocked.until) == ("tenant_cap", "A", 30.0)
    assert "max_inflight" in str(blocked)
    q.ack(leases[0], now=1)  # a slot is free: the next claim takes A's next flow
    lease = q.claim(now=1)
    assert lease is not None and lease.event_id == "a2"


def test_a_capped_tenant_keeps_its_place_and_goes_first_once_free(q: fairq.Queue) -> None:
    q.set_tenant("A", max_inflight=1, now=0)
    q.enqueue_many([(f"a{f}", {}, f"a{f}", "A") for f in range(3)], now=0)
    q.enqueue_many([(f"b{f}", {}, f"b{f}", "B") for f in range(6)], now=0)
    first = q.claim(now=0)
    assert first is not None and first.event_id == "a0"
    assert claim_ids(q, 3) == ["b0", "b1", "b2"]  # A is skipped while at its cap
    q.ack(first, now=0)
    # A did not lose its place: it is served before B, whose pass moved on.
    assert claim_ids(q, 1, ack=False) == ["a1"]


def test_an_expired_lease_does_not_hold_a_slot(q: fairq.Queue) -> None:
    q.set_tenant("A", max_inflight=1, now=0)
    q.enqueue_many([("a1", {}, "a", "A"), ("b1", {}, "b", "A")], now=0)
    assert q.claim(now=0, lease_seconds=5) is not None
    assert q.claim(now=1) is None
    lease = q.claim(now=6)  # the lease ended at 5: not leased any more
    assert lease is not None


def test_max_inflight_zero_means_no_limit(q: fairq.Queue) -> None:
    q.set_tenant("A", max_inflight=1, now=0)
    q.set_tenant("A", max_inflight=0, now=0)
    q.enqueue_many([(f"a{f}", {}, f"a{f}", "A") for f in range(3)], now=0)
    assert len([lease for lease in (q.claim(now=0) for _ in range(3)) if lease is not None]) == 3


# -- the rate -----------------------------------------------------------------------------------------


def test_a_rate_and_burst_limit_claims_on_the_queues_clock(q: fairq.Queue) -> None:
    q.set_tenant("A", rate=2, burst=3, now=0)
    q.enqueue_many([(f"a{f}", {}, f"a{f}", "A") for f in range(10)], now=0)
    assert len(claim_ids(q, 3, now=0)) == 3  # the burst
    assert q.claim(now=0) is None
    [a] = q.tenants(now=0)
    assert (a.limited_by, a.until, a.tokens) == ("rate", 0.5, 0.0)
    blocked = q.why_blocked("a3", now=0.1)
    assert (blocked.why, blocked.tenant, blocked.until) == ("tenant_rate", "A", 0.5)
    assert q.claim(now=0.4) is None
    assert len(claim_ids(q, 1, now=0.5)) == 1
    assert q.claim(now=0.5) is None
    assert len(claim_ids(q, 2, now=1.5)) == 2  # two tokens in one second


def test_a_tenant_out_of_tokens_is_skipped_without_losing_its_place(q: fairq.Queue) -> None:
    q.set_tenant("A", rate=1, burst=1, now=0)
    q.enqueue_many([(f"a{f}", {}, f"a{f}", "A") for f in range(3)], now=0)
    q.enqueue_many([(f"b{f}", {}, f"b{f}", "B") for f in range(6)], now=0)
    assert claim_ids(q, 4, now=0) == ["a0", "b0", "b1", "b2"]
    assert claim_ids(q, 1, now=1) == ["a1"]


def test_a_rate_without_a_burst_gets_burst_equal_to_the_rate(q: fairq.Queue) -> None:
    info = q.set_tenant("A", rate=4, now=0)
    assert (info.rate, info.burst, info.tokens) == (4, 4, 4.0)


# -- set_tenant ------------------------------------------------------------------------------------


def test_set_tenant_is_audited_and_none_keeps_a_setting(q: fairq.Queue) -> None:
    first = q.set_tenant("A", weight=2, max_inflight=3, reason="gold plan", actor="ops", now=0)
    assert (first.weight, first.max_inflight, first.rate, first.burst) == (2, 3, 0, 0)
    second = q.set_tenant("A", rate=5, burst=10, now=0)
    assert (second.weight, second.max_inflight, second.rate, second.burst) == (2, 3, 5, 10)
    rows = [row for row in q.audit() if row.action == "set_tenant"]
    assert [(row.reason, row.actor) for row in rows] == [("gold plan", "ops"), (None, None)]
    assert rows[0].detail["tenant"] == "A" and rows[0].detail["before"] is None
    assert rows[0].detail["after"] == {"weight": 2, "max_inflight": 3, "rate": 0, "burst": 0}
    assert rows[1].detail["before"] == rows[0].detail["after"]
    assert rows[1].detail["after"] == {"weight": 2, "max_inflight": 3, "rate": 5, "burst": 10}


@pytest.mark.parametrize("kwargs, field", [
    ({"weight": 0}, "weight"), ({"weight": 1001}, "weight"), ({"weight": "2"}, "weight"),
    ({"max_inflight": -1}, "max_inflight"), ({"max_inflight": 1.5}, "max_inflight"),
    ({"rate": -1}, "rate"), ({"burst": -2}, "burst"), ({"rate": 5000, "burst": 1}, "burst"),
    ({"reason": 7}, "reason"), ({"actor": ""}, "actor"),
])
def test_bad_tenant_settings_name_the_field_and_change_nothing(q: fairq.Queue, store, target, kwargs,
                                                                field) -> None:
    q.set_tenant("A", weight=2, now=0)
    before = store.snapshot(target)
    with pytest.raises(fairq.InvalidInput) as info:
        q.set_tenant("A", **kwargs, now=0)
    assert info.value.field == field
    assert store.snapshot(target) == before


def test_tenants_are_listed_by_name_a_page_at_a_time(q: fairq.Queue) -> None:
    for name in ["c", "a", "b", "d"]:
        q.set_tenant(name, weight=1, now=0)
    assert [t.name for t in q.tenants(limit=2, now=0)] == ["a", "b"]
    assert [t.name for t in q.tenants(after="b", now=0)] == ["c", "d"]
