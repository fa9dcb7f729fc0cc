"""The read-only SQL of tenants: one tenant or a page of them as TenantInfo,
and the tenant of a named flow.

Runs on a read snapshot or inside a write transaction; never writes. Each
figure is read through an index of the tenant's own rows (its heads by
lease end, its flows), so a tenant's cost
follows its own backlog, never the queue's. Whether a limit holds it back
now is fairq.kernel.tenants.blocked_by's to say, at the read's time (not the
hold a claim stored).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ...kernel.tenants import MILLI, Bucket, blocked_by
from ...types import TenantInfo

# A tenant's settings and bucket, then its live leases (count and earliest
# end), its ready events (counted as they change) and its named flows.
_SELECT_TENANT = (
    "SELECT t.name, t.weight, t.max_inflight, t.rate, t.burst, t.tokens_milli, t.at_ms, "
    "(SELECT count(*) FROM event INDEXED BY event_tenant_heads WHERE tenant_id = t.tenant_id "
    "AND pass IS NOT NULL AND lease_until_ms > :now_ms), "
    "(SELECT min(lease_until_ms) FROM event INDEXED BY event_tenant_heads WHERE tenant_id = t.tenant_id "
    "AND pass IS NOT NULL AND lease_until_ms > :now_ms), "
    "t.ready_n, "
    "(SELECT count(*) FROM flow INDEXED BY flow_tenant WHERE tenant_id = t.tenant_id) "
    "FROM tenant AS t "
)


def tenant_info(conn: sqlite3.Connection, name: str, now_ms: int) -> TenantInfo | None:
    """One tenant as it stands at now_ms (None: no such tenant)."""
    # By the tenant name's unique index.
    row = conn.execute(_SELECT_TENANT + "WHERE t.name = :name", {"name": name, "now_ms": now_ms}).fetchone()
    return None if row is None else _info(row, now_ms)


def tenants(conn: sqlite3.Connection, *, after: str | None, limit: int, now_ms: int) -> list[TenantInfo]:
    """Tenants by name after `after` (keyset paging through the name's unique index)."""
    params = {"after": after, "limit": limit, "now_ms": now_ms}
    if after is None:
        rows = conn.execute(_SELECT_TENANT + "ORDER BY t.name LIMIT :limit", params)
    else:
        rows = conn.execute(_SELECT_TENANT + "WHERE t.name > :after ORDER BY t.name LIMIT :limit", params)
    return [_info(row, now_ms) for row in rows]


def flow_tenant(conn: sqlite3.Connection, flow: str) -> str | None:
    """The tenant a named flow belongs to (None: none, or no such flow)."""
    # By the flow name's unique index, then the tenant's key.
    row = conn.execute("SELECT t.name FROM flow AS f JOIN tenant AS t ON t.tenant_id = f.tenant_id "
                       "WHERE f.name = :flow", {"flow": flow}).fetchone()
    return None if row is None else str(row[0])


def _info(row: Sequence[Any], now_ms: int) -> TenantInfo:
    """A TenantInfo from a row of _SELECT_TENANT, judged at now_ms."""
    name, weight, max_inflight, rate, burst, tokens_milli, at_ms, inflight, lease_end, ready, flows = row
    bucket = None if tokens_milli is None else Bucket(tokens_milli, at_ms)
    tokens = None
    if rate > 0:
        held = (bucket or Bucket.full(burst, now_ms)).level(now_ms, rate, burst)
        tokens = min(held, burst * MILLI) / MILLI  # what part of a token a full bucket keeps is not shown
    blocked = blocked_by(now_ms, inflight=inflight, max_inflight=max_inflight, bucket=bucket, rate=rate,
                         burst=burst, lease_end_ms=lease_end)
    return TenantInfo(name=name, weight=weight, max_inflight=max_inflight, rate=rate, burst=burst,
                      inflight=inflight, ready=ready, flows=flows, tokens=tokens,
                      limited_by=None if blocked is None else blocked.limit.value,
                      until=None if blocked is None or blocked.until_ms is None else blocked.until_ms / 1000)
