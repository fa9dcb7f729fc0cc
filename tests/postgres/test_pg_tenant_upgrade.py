"""Schema step 7 (tenants) on a queue a fairq before it left: every head has
no tenant, so the upgraded queue claims in exactly the order it would have
(the same order as a queue never taken back), and tenants work at once."""

from __future__ import annotations

import fairq
from fairq.stores.postgres.schema import LATEST
from pgcheck import check_pg_invariants
from pgcluster import fresh_schema, require_psycopg
from pgold import back_to

psycopg = require_psycopg()


def history(q: fairq.Queue) -> None:
    """Weighted flows, unordered events, delays, retries and leases out: passes of every kind."""
    q.set_weight("heavy", 3)
    q.enqueue_many([(f"h{i}", {}, "heavy") for i in range(12)] + [(f"l{i}", {}, "light") for i in range(6)]
                   + [(f"u{i}", {}) for i in range(4)], now=0)
    q.enqueue_many([{"event_id": f"d{i}", "body": {}, "flow": f"d{i % 3}", "delay": 5} for i in range(6)], now=0)
    leases = q.claim_many(5, now=1, lease_seconds=100)
    q.settle_many([(leases[0], "ack"), (leases[1], "retry"), (leases[2], "release")], now=2)


def drained(q: fairq.Queue) -> list[str]:
    order = []
    for step in range(200):
        leases = q.claim_many(2, now=10 + step, lease_seconds=1000)
        if not leases:
            break
        order += [lease.event_id for lease in leases]
        q.settle_many([(lease, "ack") for lease in leases], now=10 + step)
    return order


def test_an_upgraded_queue_claims_in_the_order_it_had(pg_server) -> None:
    _, kept = fresh_schema(pg_server.url)
    _, upgraded = fresh_schema(pg_server.url)
    for url in (kept, upgraded):
        with fairq.Queue(url, clock="model") as q:
            history(q)
    back_to(upgraded, 6)
    with psycopg.connect(upgraded) as conn:
        assert conn.execute("SELECT to_regclass('tenant') IS NULL").fetchone()[0]
    with fairq.Queue(upgraded, clock="model") as q:
        assert q.schema_version == LATEST >= 7
        check_pg_invariants(upgraded)
        after = drained(q)
        q.enqueue_many([("t1", {}, "tf", "T"), ("t2", {}, "tf", "T")], now=500)  # tenants at once
        assert [t.name for t in q.tenants(now=500)] == ["T"]
    with fairq.Queue(kept, clock="model") as q:
        assert drained(q) == after and len(after) > 20
    check_pg_invariants(upgraded)
