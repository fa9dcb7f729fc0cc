"""Tenants on PostgreSQL: the Conflict a batch's tenants raise, set_tenant, and
the tenant reads (TenantInfo).

What the verbs do to tenant rows is server-side (migrations/tenants.sql,
fairq_claim, fairq_settle, fairq_enqueue); this module holds what they leave
to Python: judging a refused batch item by item (the first conflict in batch
order raises, as on every store), the audited change of a tenant's settings,
and the reads, one query each. Limits are judged by fairq.kernel.tenants
(blocked_by, Bucket) at the read's time; never writes outside a WriteTxn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ...errors import Conflict
from ...kernel.records import NewEvent
from ...kernel.rows import StoredId, audit_row, fresh_events
from ...kernel.tenants import MILLI, Bucket, blocked_by
from ...types import TenantInfo

#: Advisory lock space of tenants (the second key is migrations/tenants.sql's fairq_tenant_key).
TENANT_LOCK_SPACE = 0x6675


class StoredTenant(NamedTuple):
    """The tenant a stored id names; known False: a tombstone, which does not keep it."""

    tenant: str | None
    known: bool


def _whose(tenant: str | None) -> str:
    return "has no tenant" if tenant is None else f"belongs to tenant {tenant!r}"


def _not(tenant: str | None) -> str:
    return "not to a tenant" if tenant is None else f"not {tenant!r}"


def judge_batch(items: Sequence[NewEvent], stored: Mapping[str, StoredId], tenants: Mapping[str, StoredTenant],
                flows: Mapping[str, str | None], kinds: Mapping[str, str | None] | None = None) -> dict[str, NewEvent]:
    """fresh_events, with tenants: the first item in batch order that does
    not match what it repeats (flow, body, kind (`kinds`: each stored
    event's), tenant), or that names a flow of another tenant (`flows`: the
    tenant fixed by each flow's first stored event), raises Conflict;
    nothing was written. Else the events to insert."""
    fixed = dict(flows)
    earlier: dict[str, NewEvent] = {}
    for i, item in enumerate(items):
        found = tenants.get(item.event_id)
        before = earlier.get(item.event_id)
        problem = None
        if found is not None:
            if found.known and found.tenant != item.tenant:
                problem = f"event {item.event_id!r} {_whose(found.tenant)}, {_not(item.tenant)}"
        elif before is not None:
            if before.tenant != item.tenant:
                problem = f"event {item.event_id!r} {_whose(before.tenant)}, {_not(item.tenant)}"
        elif item.flow is not None:
            if item.flow in fixed and fixed[item.flow] != item.tenant:
                problem = f"flow {item.flow!r} {_whose(fixed[item.flow])}, {_not(item.tenant)}"
            fixed.setdefault(item.flow, item.tenant)
        if item.event_id not in stored and before is None:
            earlier[item.event_id] = item
        if problem is not None:
            fresh_events(items[:i + 1], stored, kinds)  # a flow, body or kind conflict of this item or one before
            raise Conflict(item.event_id, "tenant", problem)
    return fresh_events(items, stored, kinds)


# -- reads ---------------------------------------------------------------------

#: A tenant as TenantInfo needs it, in one query: its settings and bucket,
#: its live leases and their earliest end (through head_tenant), its ready
#: events (each head's flow runs from the head's seq to its last, less the
#: discarded events its head will pass, flow.skipped; every one but a head
#: that is inflight or quarantined is ready), its named flows.
_SELECT_TENANT = (
    # The read's time: the one given, else (server clock) the server's.
    "WITH n AS (SELECT coalesce(%(now)s::bigint, (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ms) "
    "SELECT (SELECT n.ms FROM n), t.name, t.weight, t.max_inflight, t.rate, t.burst, t.tokens_milli, t.at_ms, "
    "l.n, l.lease_end, coalesce(r.ready, 0), (SELECT count(*) FROM flow AS f WHERE f.tenant_id = t.tenant_id) "
    "FROM tenant AS t "
    "LEFT JOIN LATERAL (SELECT count(*) AS n, min(h.dispatch_ms) AS lease_end FROM head AS h "
    "JOIN event AS e ON e.id = h.event_pk WHERE h.tenant_id = t.tenant_id AND h.dispatch_ms > (SELECT n.ms FROM n) "
    "AND NOT h.runnable AND e.state = 'inflight') AS l ON true "
    "LEFT JOIN LATERAL (SELECT sum(CASE WHEN h.flow_id IS NULL THEN 1 ELSE f.next_seq - e.seq - f.skipped END "
    "- CASE WHEN e.state = 'ready' THEN 0 ELSE 1 END) AS ready FROM head AS h "
    "JOIN event AS e ON e.id = h.event_pk LEFT JOIN flow AS f ON f.flow_id = h.flow_id "
    "WHERE h.tenant_id = t.tenant_id) AS r ON true "
)


def tenant_info(row: Sequence[Any]) -> TenantInfo:
    """A row of _SELECT_TENANT as TenantInfo at its time (limits by kernel.tenants.blocked_by)."""
    now_ms, name, weight, max_inflight, rate, burst, tokens, at_ms, inflight, lease_end, ready, flows = row
    rate, burst = int(rate), int(burst)
    bucket = None if tokens is None else Bucket(int(tokens), int(at_ms))
    blocked = blocked_by(now_ms, inflight=int(inflight), max_inflight=int(max_inflight), bucket=bucket, rate=rate,
                         burst=burst, lease_end_ms=None if lease_end is None else int(lease_end))
    held = bucket if bucket is not None else Bucket.full(burst, now_ms)
    return TenantInfo(
        name=name, weight=int(weight), max_inflight=int(max_inflight), rate=rate, burst=burst,
        inflight=int(inflight), ready=int(ready), flows=int(flows),
        tokens=None if rate == 0 else held.level(now_ms, rate, burst) / MILLI,
        limited_by=None if blocked is None else blocked.limit.value,
        until=None if blocked is None or blocked.until_ms is None else blocked.until_ms / 1000)


def read_tenants(conn: Any, *, after: str | None, limit: int, now_ms: int | None) -> list[TenantInfo]:
    """Tenants in byte order of their names after `after` (through
    tenant_name_bytes), at now_ms (None: the server's time)."""
    rows = conn.execute(_SELECT_TENANT + 'WHERE %(after)s::text IS NULL OR t.name COLLATE "C" > %(after)s '
                        'ORDER BY t.name COLLATE "C" LIMIT %(limit)s',
                        {"now": now_ms, "after": after, "limit": limit}).fetchall()
    return [tenant_info(r) for r in rows]


def read_tenant(conn: Any, name: str, now_ms: int | None) -> TenantInfo | None:
    """One tenant by its name's unique key."""
    row = conn.execute(_SELECT_TENANT + "WHERE t.name = %(name)s", {"now": now_ms, "name": name}).fetchone()
    return None if row is None else tenant_info(row)


def read_flow_tenant(conn: Any, flow: str) -> str | None:
    """The named flow's tenant (None: none, or no such flow), by the flow name's key."""
    row = conn.execute("SELECT t.name FROM flow AS f JOIN tenant AS t ON t.tenant_id = f.tenant_id "
                       "WHERE f.name = %(flow)s", {"flow": flow}).fetchone()
    return None if row is None else str(row[0])


# -- set_tenant ---------------------------------------------------------------------

_SETTINGS = ("weight", "max_inflight", "rate", "burst")


def set_tenant(tx: Any, name: str, *, weight: int | None, max_inflight: int | None, rate: int | None,
               burst: int | None, reason: str | None, actor: str | None, now_ms: int) -> TenantInfo:
    """Create or change a tenant's settings (None: as stored), with one audit
    row for the whole queue; the new (rate, burst) is checked by Bucket first."""
    # A new tenant's row is made with the defaults; the row is locked either way.
    created = tx.execute("INSERT INTO tenant (name) VALUES (%(name)s) ON CONFLICT (name) DO NOTHING "
                         "RETURNING tenant_id", {"name": name}).fetchone() is not None
    row = tx.execute("SELECT weight, max_inflight, rate, burst FROM tenant WHERE name = %(name)s FOR NO KEY UPDATE",
                     {"name": name}).fetchone()
    before = dict(zip(_SETTINGS, (int(v) for v in row)))
    asked = dict(zip(_SETTINGS, (weight, max_inflight, rate, burst)))
    after = {k: before[k] if v is None else int(v) for k, v in asked.items()}
    if burst is None and after["rate"] > 0 and after["burst"] == 0:
        after["burst"] = after["rate"]  # a rate without a burst: burst = rate
    Bucket.full(after["burst"], now_ms).level(now_ms, after["rate"], after["burst"])  # InvalidInput if refused
    # The settings change; a held bucket keeps its tokens (capped by the new
    # burst when next read), and a hold ends: claims judge the tenant again.
    tx.execute("UPDATE tenant SET weight = %(weight)s, max_inflight = %(max_inflight)s, rate = %(rate)s, "
               "burst = %(burst)s, held_until_ms = 0 WHERE name = %(name)s", {**after, "name": name})
    tx.append_audit([audit_row("", "set_tenant", reason, actor, None, now_ms,
                               {"tenant": name, "before": None if created else before, "after": after})])
    info = read_tenant(tx.connection, name, None if tx.server_clock else now_ms)
    assert info is not None
    return info


__all__ = ["TENANT_LOCK_SPACE", "StoredTenant", "judge_batch", "tenant_info", "read_tenants", "read_tenant",
           "read_flow_tenant", "set_tenant"]
