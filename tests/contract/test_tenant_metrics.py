"""The per-tenant metrics on every store: with 25 tenants, exactly the 20 with the most ready
events have series of their own and one tenant="other" series sums the other five; every
series together adds up to the queue's totals."""

from __future__ import annotations

import fairq
from fairq.metrics import OTHER, RANKED_TENANTS, exposition
from helpers import parse


def test_25_tenants_give_20_named_series_and_one_other_that_sum_to_the_totals(q: fairq.Queue) -> None:
    # Tenant t{i} has 2i + 3 ready events in one flow, so no two tie even after one is claimed.
    q.enqueue_many([(f"t{i:02d}-{k}", {}, f"flow-{i:02d}", f"t{i:02d}") for i in range(25)
                    for k in range(2 * i + 3)], now=0)
    for i in range(0, 25, 2):
        q.set_tenant(f"t{i:02d}", max_inflight=1, now=0)
    leases = q.claim_many(25, now=0, lease_seconds=60)  # one per flow: the even tenants reach their cap
    assert len(leases) == 25
    _, samples = parse(exposition(q.stats(now=0), q.tenants(limit=RANKED_TENANTS, now=0)))
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
