"""The per-tenant metrics on every store: with 25 tenants, exactly the 20 with the most ready
events have series of their own and one tenant="other" series sums the other five; every
series together adds up to the queue's totals."""

from __future__ import annotations

import fairq
from fairq.metrics import OTHER, every_tenant, exposition
from helpers import parse


def test_25_tenants_give_20_named_series_and_one_other_that_sum_to_the_totals(q: fairq.Queue) -> None:
    # Tenant t{i} has 2i + 3 ready events in one flow, so no two tie even after one is claimed.
    q.enqueue_many([(f"t{i:02d}-{k}", {}, f"flow-{i:02d}", f"t{i:02d}") for i in range(25)
                    for k in range(2 * i + 3)], now=0)
    for i in range(0, 25, 2):
        q.set_tenant(f"t{i:02d}", max_inflight=1, now=0)
    leases = q.claim_many(25, now=0, lease_seconds=60)  # one per flow: the even tenants reach their cap
    assert len(leases) == 25
    _, samples = parse(exposition(q.stats(now=0), q.tenants(limit=1000, now=0)))
    series: dict[str, dict[str, float]] = {}
    for name, labels, value in samples:
        if name.startswith("fairq_tenant_"):
            series.setdefault(name, {})[labels["tenant"]] = value
    named = {f"t{i:02d}" for i in range(5, 25)}
    assert {name: set(values) for name, values in series.items()} == {
        name: named | {OTHER} for name in ("fairq_tenant_inflight", "fairq_tenant_ready", "fairq_tenant_held")}
    assert series["fairq_tenant_ready"] == {**{f"t{i:02d}": 2 * i + 2 for i in range(5, 25)},
                                            OTHER: sum(2 * i + 2 for i in range(5))}
    assert series["fairq_tenant_inflight"] == {**{name: 1 for name in named}, OTHER: 5}
    assert series["fairq_tenant_held"] == {**{f"t{i:02d}": int(i % 2 == 0) for i in range(5, 25)}, OTHER: 3}
    counts = q.stats(now=0).counts
    assert sum(series["fairq_tenant_ready"].values()) == counts["ready"]
    assert sum(series["fairq_tenant_inflight"].values()) == counts["inflight"] == 25


def test_every_tenant_is_ranked_however_many_pages_they_fill(q: fairq.Queue) -> None:
    # 1,050 tenants of one event each; the last one by name has the most: it
    # lies beyond the first page of tenants and must still get its own series.
    q.enqueue_many([(f"e{i:04d}", {}, f"flow-{i:04d}", f"t{i:04d}") for i in range(1050)]
                   + [(f"last-{k}", {}, "flow-1049", "t1049") for k in range(4)], now=0)
    _, samples = parse(exposition(q.stats(now=0), every_tenant(q)))
    ready = {labels["tenant"]: value for name, labels, value in samples if name == "fairq_tenant_ready"}
    assert ready["t1049"] == 5
    assert len(ready) == 21 and ready[OTHER] == 1050 - 20
    assert sum(ready.values()) == q.stats(now=0).counts["ready"]
