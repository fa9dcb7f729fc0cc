"""The Queue's reads: one event, listings, the audit log, stats, why a flow is blocked.

QueueReads is a base class of fairq.Queue (on QueueBase, fairq.api.base): each
method validates its input and reads one snapshot of the store (fairq.stores.backend.Snapshot). A read never moves
the stored clock and never writes.
"""

from __future__ import annotations

from .. import _validate as v
from ..errors import InvalidInput
from ..limits import MAX_AUDIT_LISTED, MAX_COUNT, MAX_EVENTS_LISTED, MAX_FLOWS_LISTED
from ..stores.backend import FlowHead, Snapshot
from ..types import AuditEntry, Blocked, EventInfo, FlowInfo, State, Stats, TenantInfo
from .base import QueueBase
from .requests import blocked


class QueueReads(QueueBase):
    """The read verbs of fairq.Queue."""

    def get(self, event_id: str) -> EventInfo | None:
        """Everything stored about one event, or None."""
        event_id = v.identifier(event_id, "event_id")
        return self._store.read(lambda tx: tx.get(event_id))

    def events(self, *, state: State | str | None = None, flow: str | None = None,
               limit: int = 100, after: str | None = None, kind: str | None = None) -> list[EventInfo]:
        """Events filtered by state, flow and/or kind (flow order: by seq;
        else by enqueue order). after: the event_id of the last event of the
        previous page; the listing goes on from there (an id no event has is
        refused)."""
        if state is not None:
            try:
                state = State(state).value
            except ValueError:
                raise InvalidInput("state", f"must be one of {[s.value for s in State]}, got {state!r}") from None
        flow = v.optional_identifier(flow, "flow")
        limit = v.count(limit, "limit", low=1, high=MAX_EVENTS_LISTED)
        after = v.optional_identifier(after, "after")
        if kind is None:
            return self._store.read(lambda tx: tx.events(state=state, flow=flow, limit=limit, after=after))
        kind = v.kind(kind, "kind")
        return self._store.read(lambda tx: tx.events(state=state, flow=flow, limit=limit, after=after, kind=kind))

    def audit(self, event_id: str | None = None, *, after: int | None = None,
              limit: int | None = None) -> list[AuditEntry]:
        """Audit rows, oldest first: for one event, or for the whole queue;
        with `after` (an AuditEntry's id), only the rows after it (keyset paging)."""
        event_id = v.optional_identifier(event_id, "event_id")
        start = 0 if after is None else v.count(after, "after", low=0, high=MAX_COUNT)
        if limit is not None:
            limit = v.count(limit, "limit", low=1, high=MAX_AUDIT_LISTED)
        return self._store.read(lambda tx: tx.audit(event_id, after=start, limit=limit))

    def stats(self, *, now: float | None = None, top: int = 10) -> Stats:
        """Counts by state (zeros included), flows, oldest ready age, totals,
        claim lag median/p99 and the `top` named flows by backlog.

        A read: uses `now` (or the wall clock) for ages but never moves the
        stored clock.
        """
        now_ms = self._requested(now)[0]
        top = v.count(top, "top", low=0, high=MAX_FLOWS_LISTED)
        return self._store.read(lambda tx: tx.stats(now_ms, top=top))

    def flows(self, *, after: str | None = None, limit: int = 100, now: float | None = None) -> list[FlowInfo]:
        """Named flows by name, each with its weight, head, backlog and why it
        is blocked (as why_blocked answers), all from one snapshot. after: the
        name of the last flow of the previous page; the listing goes on from
        there. A read: never moves the clock."""
        after = v.optional_identifier(after, "after")
        limit = v.count(limit, "limit", low=1, high=MAX_FLOWS_LISTED)
        now_ms = self._requested(now)[0]
        rows, tenants = self._store.read(lambda tx: _with_tenants(tx, tx.flows(after=after, limit=limit), now_ms))
        return [FlowInfo(name=row.name, weight=row.weight,
                         backlog=0 if row.head is None else row.next_seq - row.head.seq, head=row.head,
                         blocked=blocked(row.name, (row.next_seq, row.head), now_ms, self.path,
                                         tenants.get(row.tenant), row.pause),
                         tenant=row.tenant, paused=row.pause is not None)
                for row in rows]

    def why_blocked(self, flow: str, *, now: float | None = None) -> Blocked:
        """Why a flow is not moving, in one answer: its head is quarantined
        (with the redrive and discard commands), backing off, delayed, leased or expired;
        its tenant is at its cap or out of tokens; an operator paused it; or
        the flow is ready, empty or unknown. A read: never moves the clock.
        """
        flow = v.identifier(flow, "flow")
        now_ms = self._requested(now)[0]
        found, tenant, pause = self._store.read(
            lambda tx: (tx.flow_head(flow), _tenant_of(tx, flow, now_ms), tx.flow_pause(flow)))
        return blocked(flow, found, now_ms, self.path, tenant, pause)


def _tenant_of(tx: Snapshot, flow: str, now_ms: int) -> TenantInfo | None:
    """The tenant a named flow belongs to, as it stands at now_ms (None: its own)."""
    name = tx.flow_tenant(flow)
    return None if name is None else tx.tenant(name, now_ms)


def _with_tenants(tx: Snapshot, rows: list[FlowHead],
                  now_ms: int) -> tuple[list[FlowHead], dict[str | None, TenantInfo]]:
    """Flow rows, and the tenant of each (by name) from the same snapshot."""
    tenants: dict[str | None, TenantInfo] = {}
    for name in {row.tenant for row in rows if row.tenant is not None}:
        info = tx.tenant(name, now_ms)
        if info is not None:
            tenants[name] = info
    return rows, tenants
