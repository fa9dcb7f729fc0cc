"""Tenants over HTTP: fairq.Client and AsyncClient against a real server enqueue with a
tenant, set and list tenants, and hear why a flow waits for its tenant; AsyncQueue has the
same verbs; GET /metrics has per-tenant gauges for the 20 tenants with the most ready
events and one tenant="other" series summing the rest."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import fairq
import fairq.aio
from fairq.metrics import OTHER, exposition, top_tenants
from helpers import Clock, parse, raw


def test_a_client_enqueues_with_a_tenant_sets_and_lists_tenants(client: fairq.Client) -> None:
    assert client.enqueue("a1", {"n": 1}, flow="acme-1", tenant="acme").created
    client.enqueue_many([("a2", {}, "acme-2", "acme"), {"event_id": "g1", "body": {}, "flow": "g", "tenant": "globex"},
                         ("u1", {}, "plain")])
    info = client.set_tenant("acme", weight=3, max_inflight=2, reason="gold plan", actor="ops")
    assert isinstance(info, fairq.TenantInfo)
    assert (info.name, info.weight, info.max_inflight, info.ready, info.flows) == ("acme", 3, 2, 2, 2)
    assert [(t.name, t.weight, t.ready) for t in client.tenants()] == [("acme", 3, 2), ("globex", 1, 1)]
    assert [t.name for t in client.tenants(after="acme")] == ["globex"]
    assert {f.name: f.tenant for f in client.flows()} == {"acme-1": "acme", "acme-2": "acme", "g": "globex",
                                                          "plain": None}
    [row] = [row for row in client.audit() if row.action == "set_tenant"]
    assert (row.reason, row.actor, row.detail["after"]["weight"]) == ("gold plan", "ops", 3)
    with pytest.raises(fairq.Conflict) as refused:  # a flow keeps the tenant of its first event
        client.enqueue("a3", {}, flow="acme-1", tenant="globex")
    assert refused.value.field == "tenant"


def test_why_blocked_over_http_names_the_tenants_cap_and_rate(client: fairq.Client, clock: Clock) -> None:
    client.set_tenant("acme", max_inflight=1)
    client.set_tenant("globex", rate=1, burst=1)
    client.enqueue_many([("a1", {}, "acme-1", "acme"), ("a2", {}, "acme-2", "acme"),
                         ("g1", {}, "globex-1", "globex"), ("g2", {}, "globex-2", "globex")])
    leases = client.claim_many(4, owner="w1")
    assert sorted(lease.event_id for lease in leases) == ["a1", "g1"]
    capped = client.why_blocked("acme-2")
    assert (capped.why, capped.tenant, capped.until) == ("tenant_cap", "acme", min(l.lease_until for l in leases
                                                                                   if l.event_id == "a1"))
    assert "max_inflight" in str(capped)
    rated = client.why_blocked("globex-2")
    assert (rated.why, rated.tenant, rated.until) == ("tenant_rate", "globex", clock.now + 1)
    [acme, globex] = client.tenants()
    assert (acme.limited_by, globex.limited_by, globex.tokens) == ("max_inflight", "rate", 0.0)
    clock.advance(1)  # a token again: globex's next flow is claimable; acme is still at its cap
    assert [lease.event_id for lease in client.claim_many(4, owner="w2")] == ["g2"]


def test_bad_tenant_settings_over_http_raise_the_error_naming_the_field(client: fairq.Client) -> None:
    for kwargs, field in [({"weight": 0}, "weight"), ({"max_inflight": -1}, "max_inflight"),
                          ({"rate": 5000, "burst": 1}, "burst")]:
        with pytest.raises(fairq.InvalidInput) as refused:
            client.set_tenant("acme", **kwargs)
        assert refused.value.field == field
    with pytest.raises(fairq.InvalidInput) as refused:
        client.enqueue("e1", {}, flow="f", tenant="")
    assert refused.value.field == "tenant"
    assert client.tenants() == [] and client.audit() == []


def test_the_async_client_and_queue_have_the_tenant_verbs(client: fairq.Client, q: fairq.Queue) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncClient(client) as c:
            await c.enqueue("a1", {}, flow="acme-1", tenant="acme")
            assert (await c.set_tenant("acme", weight=2)).weight == 2
            assert [t.name for t in await c.tenants()] == ["acme"]
            assert (await c.why_blocked("acme-1")).tenant == "acme"
        async with fairq.aio.AsyncQueue(q) as aq:
            await aq.enqueue("b1", {}, flow="b", tenant="bravo")
            info = await aq.set_tenant("bravo", max_inflight=4, reason="async")
            assert (info.name, info.max_inflight, info.ready) == ("bravo", 4, 1)
            assert [t.name for t in await aq.tenants()] == ["acme", "bravo"]  # the server's file

    asyncio.run(main())


# -- GET /metrics ---------------------------------------------------------------------------------


def tenant_samples(text: str) -> dict[str, dict[str, float]]:
    """{family: {tenant: value}} of the per-tenant gauges of an exposition."""
    types, samples = parse(text)
    found: dict[str, dict[str, float]] = {}
    for name, labels, value in samples:
        if name.startswith("fairq_tenant_"):
            assert types[name] == "gauge" and set(labels) == {"tenant"}
            assert labels["tenant"] not in found.setdefault(name, {}), f"two {name} series for {labels}"
            found[name][labels["tenant"]] = value
    return found


def test_metrics_has_20_tenant_series_and_one_other_summing_the_rest(server, client: fairq.Client) -> None:
    # Tenant t{i} has 2i + 3 events in one flow, so no two tie even after one is claimed.
    client.enqueue_many([(f"t{i:02d}-{k}", {}, f"flow-{i:02d}", f"t{i:02d}") for i in range(25)
                         for k in range(2 * i + 3)])
    client.enqueue("plain-1", {}, flow="plain")  # no tenant: in no tenant series
    for i in range(25):
        client.set_tenant(f"t{i:02d}", max_inflight=1)
    leases = client.claim_many(30, owner="w1", lease_seconds=300)  # at most one per flow: every tenant at its cap
    answer = raw(server, "GET", "/metrics")
    assert answer.status == 200
    series = tenant_samples(answer.text)
    assert set(series) == {"fairq_tenant_inflight", "fairq_tenant_ready", "fairq_tenant_held"}
    named = {f"t{i:02d}" for i in range(5, 25)}  # the 20 with the most ready events
    for values in series.values():
        assert set(values) == named | {OTHER}
    tenants = client.tenants()
    by_name = {t.name: t for t in tenants}
    leased = Counter(lease.flow.replace("flow-", "t") for lease in leases)
    for name in named:
        assert series["fairq_tenant_ready"][name] == by_name[name].ready
        assert series["fairq_tenant_inflight"][name] == leased[name]
        assert series["fairq_tenant_held"][name] == (by_name[name].limited_by is not None) == (leased[name] == 1)
    rest = [t for t in tenants if t.name not in named]
    assert series["fairq_tenant_ready"][OTHER] == sum(t.ready for t in rest)
    assert series["fairq_tenant_inflight"][OTHER] == sum(t.inflight for t in rest)
    assert series["fairq_tenant_held"][OTHER] == sum(t.limited_by is not None for t in rest)
    # Every tenanted event is counted once: the series sum to the queue's totals.
    stats, plain = client.stats(), client.get("plain-1")
    assert plain is not None
    plain_inflight = int(plain.state is fairq.State.INFLIGHT)
    assert sum(series["fairq_tenant_ready"].values()) == stats.counts["ready"] - (1 - plain_inflight)
    assert sum(series["fairq_tenant_inflight"].values()) == stats.counts["inflight"] - plain_inflight == 25
    assert sum(series["fairq_tenant_held"].values()) == 25


def test_metrics_without_tenants_has_no_tenant_series(server, client: fairq.Client) -> None:
    client.enqueue("e1", {}, flow="f")
    series = tenant_samples(raw(server, "GET", "/metrics").text)
    assert series == {}


def test_with_few_tenants_each_has_a_series_and_there_is_no_other(server, client: fairq.Client) -> None:
    client.enqueue_many([("a1", {}, "a", "acme"), ("b1", {}, "b", "bravo")])
    series = tenant_samples(raw(server, "GET", "/metrics").text)
    assert series["fairq_tenant_ready"] == {"acme": 1, "bravo": 1}


def test_a_tenant_named_other_is_summed_with_the_rest() -> None:
    def tenant(name: str, ready: int, held: bool = False) -> fairq.TenantInfo:
        return fairq.TenantInfo(name, 1, 0, 0, 0, inflight=1, ready=ready, flows=1,
                                limited_by="rate" if held else None)

    tenants = [tenant(OTHER, 100, held=True), tenant("a", 5), tenant("b", 3, held=True), tenant("c", 1)]
    top, other = top_tenants(tenants, 2)
    assert [t.name for t in top] == ["a", "b"]
    assert other is not None and (other.name, other.ready, other.inflight, other.flows) == (OTHER, 101, 2, 2)
    series = tenant_samples(exposition(_empty_stats(), tenants))
    assert series["fairq_tenant_held"] == {"a": 0, "b": 1, "c": 0, OTHER: 1}  # every other tenant has its own
    assert top_tenants(tenants[1:], 3) == (tenants[1:], None)


def _empty_stats() -> fairq.Stats:
    return fairq.Stats(counts={"ready": 0}, flows=0, oldest_ready_age=0.0, now=0.0)
