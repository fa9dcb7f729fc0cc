"""The read-only SQL of the queue: one event, listings, the audit log, stats,
a flow's head.

SqliteReads runs on a read snapshot (SqliteStore.read) or inside a write
transaction; it never writes. Every read goes through an index or reads only
heads (the two dispatch indexes and the quarantined one), so its cost follows
the work waiting, not the history kept.
"""

from __future__ import annotations

import json
import sqlite3

from ...kernel import policy
from ..backend import FlowHead, Pause, StoredResult
from ...errors import InvalidInput
from ...kernel.policy import Policy
from ...kernel.rows import audit_entry, event_info
from ...kernel.stats import assemble
from ...kernel.tenants import Bucket, blocked_by
from ...types import TOTALS, AuditEntry, EventInfo, State, Stats, TenantInfo
from .policy_store import read_policy
from .schedules import ScheduleTxn
from . import heads, results, tenant_reads


class SqliteReads:
    """The read statements, bound to a connection inside a transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.connection = conn

    def policy(self) -> Policy:
        """The stored retry policy."""
        return read_policy(self.connection)

    def schedules(self) -> ScheduleTxn:
        """The schedule statements, on this snapshot."""
        return ScheduleTxn(self)

    def flow_head(self, name: str) -> tuple[int, EventInfo | None] | None:
        """(the flow's backlog end, its head or None when all is acked); None for an unknown flow.

        The backlog end is the seq its next event will get.
        """
        conn = self.connection
        # By the flow name's unique index.
        flow = conn.execute(
            "SELECT flow_id, next_seq FROM flow WHERE name = :name", {"name": name}
        ).fetchone()
        if flow is None:
            return None
        flow_id, next_seq = flow
        # A binary search finds the head in about log2(events) index lookups.
        low = heads.head_seq(conn, flow_id, next_seq)
        if low == next_seq:
            return next_seq, None
        row = conn.execute(
            _SELECT_EVENT + "WHERE e.flow_id = :flow_id AND e.seq = :seq", {"flow_id": flow_id, "seq": low}
        ).fetchone()
        return next_seq, event_info(row)

    def get(self, event_id: str) -> EventInfo | None:
        # By the event_id index.
        row = self.connection.execute(
            _SELECT_EVENT + "WHERE e.event_id = :event_id", {"event_id": event_id}
        ).fetchone()
        return None if row is None else event_info(row)

    def result(self, event_id: str) -> StoredResult | None:
        return results.read_result(self.connection, event_id)

    def events(self, *, state: str | None, flow: str | None, limit: int,
               after: str | None = None, kind: str | None = None) -> list[EventInfo]:
        # Keyset paging: resume after the listed position of `after` (its seq in
        # a flow's listing, its row id otherwise), never counting skipped rows.
        after_id = after_seq = 0
        if after is not None:
            # By the event_id index.
            found = self.connection.execute(
                "SELECT id, seq FROM event WHERE event_id = :after", {"after": after}).fetchone()
            if found is None:
                raise InvalidInput("after", f"no event {after!r} is stored")
            after_id, after_seq = found
        params = {"state": state, "flow": flow, "limit": limit, "after_id": after_id, "after_seq": after_seq,
                  "kind": kind}
        if flow is not None:
            # One flow, in seq order, through its (flow_id, seq) index.
            sql = _SELECT_EVENT + (
                "WHERE e.flow_id = (SELECT flow_id FROM flow WHERE name = :flow) AND e.seq > :after_seq "
                "AND (:state IS NULL OR e.state = :state) AND (:kind IS NULL OR e.kind = :kind) "
                "ORDER BY e.seq LIMIT :limit"
            )
        elif kind is not None:
            # One kind, in enqueue order, through its (kind, id) index.
            sql = _SELECT_EVENT + ("WHERE e.kind = :kind AND e.id > :after_id "
                                   "AND (:state IS NULL OR e.state = :state) ORDER BY e.id LIMIT :limit")
        elif state == "quarantined":
            # The dead-letter list, through its partial index.
            sql = _SELECT_EVENT + ("WHERE e.state = 'quarantined' AND e.id > :after_id "
                                   "ORDER BY e.id LIMIT :limit")
        else:
            sql = _SELECT_EVENT + ("WHERE e.id > :after_id AND (:state IS NULL OR e.state = :state) "
                                   "ORDER BY e.id LIMIT :limit")
        return [event_info(r) for r in self.connection.execute(sql, params)]

    def flow_tenant(self, flow: str) -> str | None:
        return tenant_reads.flow_tenant(self.connection, flow)

    def tenant(self, name: str, now_ms: int) -> TenantInfo | None:
        return tenant_reads.tenant_info(self.connection, name, now_ms)

    def tenants(self, *, after: str | None, limit: int, now_ms: int) -> list[TenantInfo]:
        return tenant_reads.tenants(self.connection, after=after, limit=limit, now_ms=now_ms)

    def flow_pause(self, flow: str) -> Pause | None:
        # By the flow name's unique index.
        found = self.connection.execute(
            "SELECT pause_reason, pause_actor, paused_ms FROM flow WHERE name = :name AND paused = 1",
            {"name": flow}).fetchone()
        return None if found is None else Pause(*found)

    def flows(self, *, after: str | None, limit: int) -> list[FlowHead]:
        # Named flows in name order, resuming after `after` through flow.name's
        # unique index (keyset paging); each head found as flow_head finds it.
        # Each flow's tenant by the tenant's key.
        if after is None:
            rows = self.connection.execute(
                "SELECT name, weight, (SELECT t.name FROM tenant AS t WHERE t.tenant_id = flow.tenant_id), "
                "paused, pause_reason, pause_actor, paused_ms FROM flow ORDER BY name LIMIT :limit",
                {"limit": limit}).fetchall()
        else:
            rows = self.connection.execute(
                "SELECT name, weight, (SELECT t.name FROM tenant AS t WHERE t.tenant_id = flow.tenant_id), "
                "paused, pause_reason, pause_actor, paused_ms FROM flow WHERE name > :after ORDER BY name "
                "LIMIT :limit", {"after": after, "limit": limit}).fetchall()
        out = []
        for name, weight, tenant_name, paused, reason, actor, paused_ms in rows:
            found = self.flow_head(name)
            assert found is not None  # read in this same snapshot
            out.append(FlowHead(name, weight, found[0], found[1], tenant_name,
                                Pause(reason, actor, paused_ms) if paused else None))
        return out

    def audit(self, event_id: str | None, *, after: int, limit: int | None) -> list[AuditEntry]:
        params = {"event_id": event_id, "after": after, "limit": limit}
        if event_id is None:
            # The whole log, oldest first, from the row after `after` (by the primary key).
            rows = self.connection.execute(
                _SELECT_AUDIT + "WHERE id > :after ORDER BY id LIMIT coalesce(:limit, -1)", params)
        else:
            # One event's history, through audit_event (event_id, id).
            rows = self.connection.execute(
                _SELECT_AUDIT + "WHERE event_id = :event_id AND id > :after ORDER BY id "
                "LIMIT coalesce(:limit, -1)", params)
        return [audit_entry(r) for r in rows]

    def stats(self, now_ms: int, *, top: int) -> Stats:
        conn = self.connection
        # Counts and totals are kept with the clock: nothing is counted here.
        row = conn.execute(
            "SELECT ready_n, inflight_n, acked_n, quarantined_n, discarded_n, enqueued_total, claimed_total, "
            "expired_total, acked_total, retried_total, quarantined_total, redriven_total, discarded_total, "
            "claim_lag FROM queue_state WHERE id = 1"
        ).fetchone()
        # Retention keeps its own counters (written only by purge).
        purged, tombstones = conn.execute(
            "SELECT purged_total, tombstones_n FROM retention WHERE id = 1"
        ).fetchone()
        # Every flow with unacked events has exactly one head, in one of the
        # partial indexes (waiting, runnable, paused) or quarantined: stats
        # reads heads, never the events behind them.
        heads_n, paused = conn.execute(
            "SELECT (SELECT count(*) FROM event WHERE runnable = 1 AND tenant_id IS NULL) "
            "+ (SELECT count(*) FROM event WHERE runnable = 1 AND tenant_id IS NOT NULL) "
            "+ (SELECT count(*) FROM event WHERE runnable = 0 AND dispatch_ms IS NOT NULL), "
            "(SELECT count(*) FROM event INDEXED BY event_paused "
            "WHERE pass IS NOT NULL AND dispatch_ms IS NULL AND state != 'quarantined')"
        ).fetchone()
        # The longest-claimable ready head: among the runnable ones, or among
        # waiting ones whose time came but that no claim has promoted yet.
        oldest = conn.execute(
            "SELECT min(m) FROM ("
            "SELECT min(dispatch_ms) AS m FROM event WHERE runnable = 1 AND tenant_id IS NULL AND state = 'ready' "
            "UNION ALL SELECT min(dispatch_ms) FROM event "
            "WHERE runnable = 1 AND tenant_id IS NOT NULL AND state = 'ready' "
            "UNION ALL SELECT min(dispatch_ms) FROM event "
            "WHERE runnable = 0 AND dispatch_ms <= :now_ms AND state = 'ready')",
            {"now_ms": now_ms},
        ).fetchone()[0]
        # A named flow's backlog runs from its head's seq to its last seq.
        top_flows = conn.execute(
            "SELECT f.name, f.next_seq - e.seq AS backlog FROM event AS e JOIN flow AS f "
            "ON f.flow_id = e.flow_id WHERE e.id IN ("
            "SELECT id FROM event WHERE runnable = 1 AND tenant_id IS NULL "
            "UNION ALL SELECT id FROM event WHERE runnable = 1 AND tenant_id IS NOT NULL "
            "UNION ALL SELECT id FROM event WHERE runnable = 0 AND dispatch_ms IS NOT NULL "
            "UNION ALL SELECT id FROM event WHERE state = 'quarantined' "
            "UNION ALL SELECT id FROM event INDEXED BY event_paused "
            "WHERE pass IS NOT NULL AND dispatch_ms IS NULL AND state != 'quarantined') "
            "ORDER BY backlog DESC, f.name LIMIT :top",
            {"top": top},
        ).fetchall() if top else []
        blocked = row[3] + paused  # a quarantined head (row[3] of them) blocks its flow, as a pause does
        return assemble(now_ms=now_ms, counts=dict(zip((s.value for s in State), row[:5])),
                        totals=dict(zip(TOTALS, row[5:13])), purged=purged, lags=policy.lag_counts(row[13]),
                        flows=heads_n + blocked, oldest_ready_ms=oldest, top_flows=top_flows,
                        tombstones=tombstones, claimable_now=claimable_now(conn, now_ms), blocked_flows=blocked)


# The heads a claim could take at :now_ms: the runnable ones (the rotation
# indexes: counted for no tenant, one row each of a tenant) and the waiting
# ones whose time has come (the waiting index, up to now); a quarantined
# head, or a paused flow's, is in none of them.
_CLAIMABLE = (
    "SELECT NULL, count(*) FROM event INDEXED BY event_rotation WHERE runnable = 1 AND tenant_id IS NULL "
    "UNION ALL SELECT tenant_id, 1 FROM event INDEXED BY event_tenant_rotation "
    "WHERE runnable = 1 AND tenant_id IS NOT NULL "
    "UNION ALL SELECT tenant_id, 1 FROM event INDEXED BY event_waiting "
    "WHERE runnable = 0 AND dispatch_ms IS NOT NULL AND dispatch_ms <= :now_ms"
)

# What the limits of those heads' tenants are judged on: the settings, the
# bucket and the live leases (counted only under a cap), by the tenants' keys.
_LIMITS = (
    "SELECT t.tenant_id, t.max_inflight, t.rate, t.burst, t.tokens_milli, t.at_ms, "
    "CASE WHEN t.max_inflight > 0 THEN (SELECT count(*) FROM event INDEXED BY event_tenant_heads "
    "WHERE tenant_id = t.tenant_id AND pass IS NOT NULL AND lease_until_ms > :now_ms) END, "
    "CASE WHEN t.max_inflight > 0 THEN (SELECT min(lease_until_ms) FROM event INDEXED BY event_tenant_heads "
    "WHERE tenant_id = t.tenant_id AND pass IS NOT NULL AND lease_until_ms > :now_ms) END "
    "FROM json_each(:ids) AS j JOIN tenant AS t ON t.tenant_id = j.value"
)


def claimable_now(conn: sqlite3.Connection, now_ms: int) -> int:
    """How many heads a claim could take at now_ms: due, in a flow that is
    not paused, not quarantined, of no tenant or of one no limit holds back
    (fairq.kernel.tenants.blocked_by)."""
    total = 0
    due: dict[int, int] = {}  # a tenant's due heads
    for tenant_id, n in conn.execute(_CLAIMABLE, {"now_ms": now_ms}):
        if tenant_id is None:
            total += n
        else:
            due[tenant_id] = due.get(tenant_id, 0) + n
    if not due:
        return total
    for tenant_id, max_inflight, rate, burst, tokens_milli, at_ms, inflight, lease_end in conn.execute(
            _LIMITS, {"now_ms": now_ms, "ids": json.dumps(sorted(due))}):
        bucket = None if tokens_milli is None else Bucket(tokens_milli, at_ms)
        if blocked_by(now_ms, inflight=inflight or 0, max_inflight=max_inflight, bucket=bucket, rate=rate,
                      burst=burst, lease_end_ms=lease_end) is None:
            total += due[tenant_id]
    return total


_SELECT_AUDIT = "SELECT event_id, action, reason, actor, generation, at_ms, detail, id FROM audit "

_SELECT_EVENT = (
    "SELECT e.event_id, f.name, e.seq, e.body, e.state, e.generation, e.attempts, "
    "e.lifetime_attempts, e.next_at_ms, e.lease_until_ms, e.owner, e.reason, "
    "e.created_ms, e.due_ms, e.first_claim_ms, e.settled_ms, e.kind, e.max_attempts, e.timeout_ms "
    "FROM event AS e LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
)
