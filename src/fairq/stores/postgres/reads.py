"""The read-only SQL of the PostgreSQL queue: one event, listings, the audit
log, stats, a flow's head, the policy.

PgReads runs on one read-only snapshot (PgStore.read) and never writes.
Counts and totals are sums of the sharded counters, never counts of events;
the head reads go through the head table's indexes.
"""

from __future__ import annotations

from typing import Any

from ...kernel import policy
from ..backend import FlowHead, Pause, StoredResult
from ...errors import InvalidInput
from ...kernel.policy import Policy
from ...kernel.rows import audit_entry, event_info
from ...kernel.stats import assemble
from ...types import TOTALS, AuditEntry, EventInfo, Stats, TenantInfo
from .policy_store import read_policy
from . import operators, results, tenants
from .schedules import PgSchedules
from .txn import SERVER_NOW

_SELECT_AUDIT = "SELECT event_id, action, reason, actor, generation, at_ms, detail, id FROM audit "

_EVENT_COLUMNS = (
    "e.event_id, f.name, e.seq, e.body, e.state, e.generation, e.attempts, "
    "e.lifetime_attempts, e.next_at_ms, e.lease_until_ms, e.owner, e.reason, "
    "e.created_ms, e.due_ms, e.first_claim_ms, e.settled_ms, e.kind, e.max_attempts, e.timeout_ms "
)
_SELECT_EVENT = "SELECT " + _EVENT_COLUMNS + "FROM event AS e LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
# A flow, and its head (the flow's one head row names its lowest unacked event; none when all is acked).
_SELECT_FLOW = ("SELECT f.name, f.weight, f.next_seq, "
                "(SELECT t.name FROM tenant AS t WHERE t.tenant_id = f.tenant_id), f.paused, f.pause_reason, "
                "f.pause_actor, f.paused_ms, " + _EVENT_COLUMNS + "FROM flow AS f "
                "LEFT JOIN head AS h ON h.flow_id = f.flow_id LEFT JOIN event AS e ON e.id = h.event_pk ")


class PgReads:
    """The read statements, bound to a connection inside a read-only snapshot."""

    def __init__(self, conn: Any, *, server_clock: bool) -> None:
        self.connection = conn
        self.server_clock = server_clock

    def policy(self) -> Policy:
        return read_policy(self.connection)

    def schedules(self) -> PgSchedules:
        return PgSchedules(self.connection)

    def flow_head(self, name: str) -> tuple[int, EventInfo | None] | None:
        conn = self.connection
        # By the flow name's unique key.
        flow = conn.execute("SELECT flow_id, next_seq FROM flow WHERE name = %(name)s", {"name": name}).fetchone()
        if flow is None:
            return None
        flow_id, next_seq = int(flow[0]), int(flow[1])
        # The flow's head row names its lowest unacked event.
        row = conn.execute(_SELECT_EVENT + "JOIN head AS h ON h.event_pk = e.id WHERE h.flow_id = %(flow_id)s",
                           {"flow_id": flow_id}).fetchone()
        return next_seq, None if row is None else event_info(row)

    def result(self, event_id: str) -> StoredResult | None:
        return results.read_result(self.connection, event_id)

    def get(self, event_id: str) -> EventInfo | None:
        # By the event_id key.
        row = self.connection.execute(_SELECT_EVENT + "WHERE e.event_id = %(event_id)s",
                                      {"event_id": event_id}).fetchone()
        return None if row is None else event_info(row)

    def events(self, *, state: str | None, flow: str | None, limit: int,
               after: str | None = None, kind: str | None = None) -> list[EventInfo]:
        # Keyset paging: resume after the listed position of `after` (its seq in
        # a flow's listing, its row id otherwise), never counting skipped rows.
        after_id = after_seq = 0
        if after is not None:
            # By the event_id key.
            found = self.connection.execute("SELECT id, seq FROM event WHERE event_id = %(after)s",
                                            {"after": after}).fetchone()
            if found is None:
                raise InvalidInput("after", f"no event {after!r} is stored")
            after_id, after_seq = int(found[0]), int(found[1])
        params = {"state": state, "flow": flow, "limit": limit, "after_id": after_id, "after_seq": after_seq,
                  "kind": kind}
        if flow is not None:
            # One flow, in seq order, through its (flow_id, seq) key.
            sql = _SELECT_EVENT + ("WHERE e.flow_id = (SELECT flow_id FROM flow WHERE name = %(flow)s) "
                                   "AND e.seq > %(after_seq)s "
                                   "AND (%(state)s::text IS NULL OR e.state = %(state)s::text) "
                                   "AND (%(kind)s::text IS NULL OR e.kind = %(kind)s::text) "
                                   "ORDER BY e.seq LIMIT %(limit)s")
        elif kind is not None:
            # One kind, in enqueue order, through event_kind from `after` on.
            sql = _SELECT_EVENT + ("WHERE e.kind = %(kind)s AND e.id > %(after_id)s "
                                   "AND (%(state)s::text IS NULL OR e.state = %(state)s::text) "
                                   "ORDER BY e.id LIMIT %(limit)s")
        elif state == "quarantined":
            # The dead-letter list: quarantined events are heads without a
            # dispatch time; the page is cut from head_quarantined (in event
            # order) before any event is read.
            sql = ("SELECT " + _EVENT_COLUMNS + "FROM (SELECT event_pk FROM head WHERE dispatch_ms IS NULL "
                   "AND event_pk > %(after_id)s ORDER BY event_pk LIMIT %(limit)s) AS h "
                   "JOIN event AS e ON e.id = h.event_pk LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
                   "ORDER BY h.event_pk")
        else:
            # Enqueue order, through the primary key from `after` on.
            sql = _SELECT_EVENT + ("WHERE e.id > %(after_id)s "
                                   "AND (%(state)s::text IS NULL OR e.state = %(state)s::text) "
                                   "ORDER BY e.id LIMIT %(limit)s")
        return [event_info(r) for r in self.connection.execute(sql, params)]

    def flow_tenant(self, flow: str) -> str | None:
        return tenants.read_flow_tenant(self.connection, flow)

    def tenant(self, name: str, now_ms: int) -> TenantInfo | None:
        return tenants.read_tenant(self.connection, name, self._now(now_ms))

    def tenants(self, *, after: str | None, limit: int, now_ms: int) -> list[TenantInfo]:
        return tenants.read_tenants(self.connection, after=after, limit=limit, now_ms=self._now(now_ms))

    def _now(self, now_ms: int) -> int | None:
        """The read's time (None: the server's, read by the statement)."""
        return None if self.server_clock else now_ms

    def flow_pause(self, flow: str) -> Pause | None:
        return operators.read_pause(self.connection, flow)

    def flows(self, *, after: str | None, limit: int) -> list[FlowHead]:
        # Named flows in byte order of their names (as SQLite orders them),
        # resuming after `after` through flow_name_bytes (keyset paging); each
        # flow's head through head.flow_id's key.
        if after is None:
            rows = self.connection.execute(_SELECT_FLOW + 'ORDER BY f.name COLLATE "C" LIMIT %(limit)s',
                                           {"limit": limit})
        else:
            rows = self.connection.execute(_SELECT_FLOW + 'WHERE f.name COLLATE "C" > %(after)s '
                                           'ORDER BY f.name COLLATE "C" LIMIT %(limit)s',
                                           {"after": after, "limit": limit})
        return [FlowHead(r[0], int(r[1]), int(r[2]), None if r[8] is None else event_info(r[8:]), r[3],
                         Pause(r[5], r[6], int(r[7])) if r[4] else None) for r in rows]

    def audit(self, event_id: str | None, *, after: int, limit: int | None) -> list[AuditEntry]:
        params = {"event_id": event_id, "after": after, "limit": limit}
        if event_id is None:
            # The whole log, oldest first, from the row after `after` (by the primary key).
            rows = self.connection.execute(_SELECT_AUDIT + "WHERE id > %(after)s ORDER BY id LIMIT %(limit)s",
                                           params)
        else:
            # One event's history, through audit_event (event_id, id).
            rows = self.connection.execute(
                _SELECT_AUDIT + "WHERE event_id = %(event_id)s AND id > %(after)s ORDER BY id LIMIT %(limit)s",
                params)
        return [audit_entry(r) for r in rows]

    def counters(self) -> dict[str, int]:
        """Every counter: the sum of its shards."""
        return {name: int(n) for name, n in self.connection.execute(
            "SELECT name, sum(n) FROM counter GROUP BY name")}

    def stats(self, now_ms: int, *, top: int) -> Stats:
        conn = self.connection
        if self.server_clock:
            now_ms = int(conn.execute(SERVER_NOW).fetchone()[0])
        kept = self.counters()
        # Every flow with unacked events has exactly one head row.
        heads = int(conn.execute("SELECT count(*) FROM head").fetchone()[0])
        # The longest-claimable ready head: runnable, or due but not yet
        # promoted (never a paused flow's: head_waiting leaves it out).
        oldest = conn.execute(
            "SELECT min(h.dispatch_ms) FROM head AS h JOIN event AS e ON e.id = h.event_pk "
            "WHERE e.state = 'ready' AND (h.runnable OR (NOT h.runnable AND h.dispatch_ms <= %(now_ms)s "
            "AND NOT h.paused))",
            {"now_ms": now_ms},
        ).fetchone()[0]
        # A named flow's backlog runs from its head's seq to its last seq,
        # less the discarded events its head will pass (flow.skipped).
        top_flows = conn.execute(
            "SELECT f.name, f.next_seq - e.seq - f.skipped AS backlog FROM head AS h JOIN event AS e ON e.id = h.event_pk "
            "JOIN flow AS f ON f.flow_id = h.flow_id ORDER BY backlog DESC, f.name LIMIT %(top)s",
            {"top": top},
        ).fetchall() if top else []
        claimable, blocked = operators.read_counts(conn, now_ms)
        return assemble(now_ms=now_ms, counts=kept,
                        totals={name: kept.get(f"total_{name}", 0) for name in TOTALS},
                        purged=kept.get("total_purged", 0),
                        lags=[kept.get(f"lag_{i}", 0) for i in range(policy.CLAIM_LAG_BUCKETS)],
                        flows=heads, oldest_ready_ms=oldest, top_flows=top_flows,
                        tombstones=kept.get("total_tombstones", 0), claimable_now=claimable,
                        blocked_flows=blocked)

    def earliest_ready_ms(self) -> int | None:
        """The earliest dispatch time of a waiting head (head_waiting's first entry)."""
        row = self.connection.execute(
            "SELECT dispatch_ms FROM head WHERE NOT runnable AND dispatch_ms IS NOT NULL AND NOT paused "
            "ORDER BY dispatch_ms LIMIT 1").fetchone()
        return None if row is None else int(row[0])
