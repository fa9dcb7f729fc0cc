"""A claim's cost does not depend on how many tenants wait at their cap or sit
idle: beside 10,000 tenants held at their cap and 100,000 idle ones (after
ANALYZE), the plans of fairq_claim's statements (auto_explain, nested
statements) find the claimable tenant through tenant_rotation and release
holds through tenant_held, never reading the tenant table, the heads or the
events sequentially; the tenant reads go through their keys."""

from __future__ import annotations

from typing import Any

import fairq
from fairq.stores.postgres import claim
from pgcluster import require_psycopg

psycopg = require_psycopg()

CAPPED = 10_000
IDLE = 100_000


def explained(url: str, sql: str, params: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """The rows of `sql` and the plans of every statement it ran (auto_explain)."""
    found: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: found.append(str(diag.message_primary)))
        for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                        "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_level = 'notice'",
                        "SET client_min_messages = 'notice'"):
            conn.execute(setting)
        rows = conn.execute(sql, params).fetchall()
    return rows, found


def test_a_claim_beside_ten_thousand_capped_tenants_and_a_hundred_thousand_idle_ones_reads_the_rotation_index(
        pg_url: str) -> None:
    with fairq.Queue(pg_url, lease_seconds=3600) as q:
        # Each capped tenant: two flows, one leased, the other waiting for a slot.
        q.enqueue_many([{"event_id": f"c{t}-{f}", "body": {}, "flow": f"c{t}-{f}", "tenant": f"cap{t}"}
                        for t in range(CAPPED) for f in range(2)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE tenant SET max_inflight = 1")
            conn.execute("INSERT INTO tenant (name) SELECT 'idle' || g FROM generate_series(1, %s) AS g", (IDLE,))
        while q.claim_many(250):  # one lease each, then every capped tenant is judged and held
            pass
        q.enqueue_many([{"event_id": f"p{i}", "body": {}, "flow": f"p{i % 2}"} for i in range(100)])
        q.enqueue_many([{"event_id": f"w{i}", "body": {}, "flow": f"w{i % 10}", "tenant": "free"}
                        for i in range(100)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            held = conn.execute("SELECT count(*) FROM tenant WHERE held_until_ms > 0").fetchone()[0]
            assert held == CAPPED
            conn.execute("ANALYZE")
    call = {"model": False, "requested": 0, "explicit": False, "owner": None, "lease_ms": None,
            "max_attempts": None, "fold": 0}
    rows, found = explained(pg_url, claim._CLAIM, {**call, "n": 4})
    assert sorted(r[0][0] for r in rows) == ["p", "p", "w", "w"]  # both levels took turns
    assert any("tenant_rotation" in p for p in found), "\n\n".join(found)
    assert any("tenant_held" in p for p in found), "\n\n".join(found)
    assert any("head_tenant_rotation" in p for p in found), "\n\n".join(found)
    scans = [p for p in found if any(f"Seq Scan on {t}" in p for t in ("tenant", "head", "event"))]
    assert not scans, "\n\n".join(scans)
    with fairq.Queue(pg_url) as q:
        [info] = q.tenants(after="cap9998", limit=1)
        assert (info.name, info.inflight, info.limited_by) == ("cap9999", 1, "max_inflight")
