"""The SQL of enqueue: new events at the ends of their flows, repeats judged.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
Set-based: one read of the ids already known, one seq allocation for every
flow in the batch, one read of which flows already have a head, one insert.
A single event of a flow of its own is one insert that writes nothing when
its id is known (then read and judged as above).
Whether a repeat matches (fairq.kernel.rules.check_repeat) and where a new head
joins the rotation (fairq.kernel.rules.join_pass; a tenant's head,
fairq.kernel.tenants.join) are the rules' to say.

A flow belongs to the tenant of its first event (flow.tenant_id), and each
event to its flow's (event.tenant_id; an unordered event to its own). An
enqueue that names another tenant for a stored flow or event raises
Conflict, and the call's transaction undoes whatever it wrote before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...errors import Conflict
from ...kernel import rules
from ..backend import NewEvent
from ...kernel.rows import StoredId, enqueued, fresh_events, placed, ready_at
from ...types import Enqueued
from . import heads
from .tenant_rows import Joining, flow_conflict, joining, tenant_name, write_joined
from .txn import TxnCore


# An event id names one (flow, body, tenant, kind) forever: a repeat must
# match it, and so must a repeat of a purged id, while its tombstone is kept
# (an id is never in both tables). Both read by the event_id indexes. A
# tombstone knows its tenant through its named flow; of an unordered event
# it does not (the sixth column: whether the tenant is known); it keeps no
# kind (the last column: whether the kind, the seventh, is known).
_KNOWN = (
    "SELECT e.event_id, f.name, e.seq, e.body, (SELECT n.name FROM tenant AS n WHERE n.tenant_id = e.tenant_id), "
    "1, e.kind, 1 FROM event AS e LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
    "WHERE e.event_id IN (SELECT value FROM json_each(:ids)) "
    "UNION ALL "
    "SELECT t.event_id, f.name, t.seq, t.body_hash, (SELECT n.name FROM tenant AS n WHERE n.tenant_id = f.tenant_id), "
    "t.flow_id IS NOT NULL, NULL, 0 FROM tombstone AS t LEFT JOIN flow AS f ON f.flow_id = t.flow_id "
    "WHERE t.event_id IN (SELECT value FROM json_each(:ids))"
)
_KNOWN_ONE = (
    "SELECT e.event_id, f.name, e.seq, e.body, (SELECT n.name FROM tenant AS n WHERE n.tenant_id = e.tenant_id), "
    "1, e.kind, 1 FROM event AS e LEFT JOIN flow AS f ON f.flow_id = e.flow_id WHERE e.event_id = :id "
    "UNION ALL "
    "SELECT t.event_id, f.name, t.seq, t.body_hash, (SELECT n.name FROM tenant AS n WHERE n.tenant_id = f.tenant_id), "
    "t.flow_id IS NOT NULL, NULL, 0 FROM tombstone AS t LEFT JOIN flow AS f ON f.flow_id = t.flow_id "
    "WHERE t.event_id = :id"
)


# The columns of an event's kind and own policy, and their positional marks.
_TASK = (", kind, max_attempts, timeout_ms, backoff", ", ?, ?, ?, ?")

# A new id of a flow of its own becomes that flow's head (seq 1) at the end
# of the rotation; an id already stored or tombstoned inserts nothing (and
# is judged by _KNOWN_ONE). Positional parameters, in the column order.
_OWN_FLOW = (
    "INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms, "
    "pass, turn, dispatch_ms, runnable{columns}) SELECT ?1, NULL, 1, ?2, 'ready', ?3, ?4, ?4, ?5, ?6, ?4, ?7{marks} "
    "WHERE NOT EXISTS (SELECT 1 FROM tombstone WHERE event_id = ?1) "
    "ON CONFLICT (event_id) DO NOTHING"
)
_INSERT_OWN_FLOW = _OWN_FLOW.format(columns="", marks="")
# The same, for an event with a kind or a policy of its own (then in ?8 to ?11).
_INSERT_OWN_FLOW_TASK = _OWN_FLOW.format(columns=_TASK[0], marks=", ?8, ?9, ?10, ?11")

# A batch's new events (only heads get a rotation place and a dispatch
# time); with each event's tenant, and with its kind and policy, when the
# batch has any (a batch without them writes neither).
_INSERT = ("INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms, "
           "pass, turn, dispatch_ms, runnable{columns}) VALUES (?, ?, ?, ?, 'ready', ?, ?, ?, ?, ?, ?, ?{marks})")
_TENANT = (", tenant_id", ", ?")
_INSERTS = {(tenanted, tasked): _INSERT.format(columns=(_TENANT[0] if tenanted else "") + (_TASK[0] if tasked else ""),
                                               marks=(_TENANT[1] if tenanted else "") + (_TASK[1] if tasked else ""))
            for tenanted in (False, True) for tasked in (False, True)}


def enqueue_many(tx: TxnCore, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
    """Store each new event at the end of its flow; identical repeats collapse.

    Any conflict raises before anything is written.
    """
    if (len(items) == 1 and items[0].flow is None and items[0].tenant is None
            and _insert_own_flow(tx, items[0], now_ms)):
        return [Enqueued(items[0].event_id, None, 1, True)]  # a new flow's first seq
    if len(items) == 1:  # one id: looked up by value, without a JSON list
        found = tx.connection.execute(_KNOWN_ONE, {"id": items[0].event_id}).fetchall()
    else:
        found = tx.connection.execute(_KNOWN, {"ids": json.dumps([item.event_id for item in items])}).fetchall()
    stored = {row[0]: StoredId._make(row[:4]) for row in found}
    fresh = fresh_events(items, stored, {row[0]: row[6] for row in found if row[7]})
    _check_repeated_tenants(items, {row[0]: row[4] for row in found if row[5]}, fresh)
    seqs = _insert_events(tx, list(fresh.values()), now_ms) if fresh else {}
    return enqueued(items, stored, seqs)


def _check_repeated_tenants(items: Sequence[NewEvent], stored: dict[str, str | None],
                            fresh: dict[str, NewEvent]) -> None:
    """A repeat of an id must name the tenant it was stored with (where the
    store knows it) or that its first item in the batch named: Conflict
    (field "tenant") otherwise, before anything is written."""
    for item in items:
        if item.event_id in stored:
            known = stored[item.event_id]
        elif item.event_id in fresh:
            known = fresh[item.event_id].tenant
        else:
            continue
        if known != item.tenant:
            raise Conflict(item.event_id, "tenant",
                           f"event {item.event_id!r} is already stored with "
                           f"{'no tenant' if known is None else f'tenant {known!r}'}, not "
                           f"{'no tenant' if item.tenant is None else repr(item.tenant)}")


def _insert_own_flow(tx: TxnCore, item: NewEvent, now_ms: int) -> bool:
    """Insert one event of a flow of its own if its id is new (one statement
    where a lookup and an insert would be two); False: the id is known, and
    nothing was written."""
    row = tx.state_row()
    next_at = ready_at(item, now_ms)
    turn = row.turn + 1  # taken below only if the insert happened
    params: tuple[Any, ...] = (item.event_id, item.body, now_ms, next_at, rules.join_pass(row.tail), turn,
                               int(next_at <= now_ms))
    if item.tasked:
        inserted = tx.cursor.execute(_INSERT_OWN_FLOW_TASK, (*params, item.kind, item.max_attempts, item.timeout_ms,
                                                             item.backoff)).rowcount
    else:
        inserted = tx.cursor.execute(_INSERT_OWN_FLOW, params).rowcount
    if not inserted:
        return False
    taken = tx.next_turn()
    assert taken == turn
    tx.moved(None, "ready")
    tx.happened("enqueued")
    return True


def _insert_events(tx: TxnCore, items: list[NewEvent], now_ms: int) -> dict[str, int]:
    """Insert new events; returns their seqs. An event that finds its flow
    idle becomes its head and joins the rotation behind every flow in it
    (a tenant's, behind every flow of its tenant)."""
    row = tx.state_row()
    counts: dict[str, int] = {}  # events per named flow in this batch
    firsts: dict[str, NewEvent] = {}  # each named flow's first event: every other names its tenant
    for item in items:
        if item.flow is not None:
            counts[item.flow] = counts.get(item.flow, 0) + 1
            first = firsts.setdefault(item.flow, item)
            if first.tenant != item.tenant:
                raise flow_conflict(item.event_id, item.flow, first.tenant, item.tenant)
    named = {item.tenant for item in items if item.tenant is not None}
    tenants = joining(tx, named) if named else {}
    paused: set[str] = set()  # the batch's paused flows: a head made there waits for the resume
    flows = _allocate_seqs(tx, counts, firsts, tenants, paused) if counts else {}
    rows: list[tuple[Any, ...]] = []
    seqs = {}
    for p in placed(items, flows, now_ms):
        item, next_at = p.item, p.next_at_ms
        tenant = None if item.tenant is None else tenants[item.tenant]
        if tenant is not None:
            tenant.ready += 1
        if p.head:
            stopped = item.flow in paused
            runnable = int(next_at <= now_ms and not stopped)
            if tenant is None:
                pass_ = rules.join_pass(row.tail)
            else:
                pass_ = tenant.head_pass(tx)  # the tenant's turn (if it joins) first, then the head's
                tenant.runnable += runnable
            rows.append((item.event_id, p.flow_id, p.seq, item.body, now_ms, next_at, next_at,
                         pass_, tx.next_turn(), None if stopped else next_at, runnable))
        else:
            rows.append((item.event_id, p.flow_id, p.seq, item.body, now_ms, next_at, next_at,
                         None, None, None, 0))
        seqs[item.event_id] = p.seq
    # Positional parameters, in the column order: the hottest insert, where
    # binding eleven named ones cost ~4 us a row.
    tasked = any(item.tasked for item in items)
    if tenants:
        # Each event carries its tenant, and the tenants their new heads.
        rows = [(*r, None if item.tenant is None else tenants[item.tenant].tenant_id) for r, item in zip(rows, items)]
    if tasked:
        rows = [(*r, item.kind, item.max_attempts, item.timeout_ms, item.backoff) for r, item in zip(rows, items)]
    tx.connection.executemany(_INSERTS[bool(tenants), tasked], rows)
    if tenants:
        write_joined(tx, tenants.values())
    tx.moved(None, "ready", len(rows))
    tx.happened("enqueued", len(rows))
    return seqs


# Each flow hands out its next `count` seqs; a new flow starts at 1. The
# flow's tenant comes back, to be checked: a flow never given an event (made
# by set_weight) takes the tenant of its first one, and keeps it.
_ALLOCATE = (
    "INSERT INTO flow (name, next_seq) SELECT key, 1 + value FROM json_each(:counts) WHERE true "
    "ON CONFLICT (name) DO UPDATE SET next_seq = next_seq + excluded.next_seq - 1 "
    "RETURNING flow_id, name, next_seq, tenant_id, paused"
)
_ALLOCATE_WITH_TENANTS = (
    "INSERT INTO flow (name, next_seq, tenant_id) "
    "SELECT key, 1 + json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:counts) WHERE true "
    "ON CONFLICT (name) DO UPDATE SET next_seq = next_seq + excluded.next_seq - 1, "
    "tenant_id = CASE WHEN next_seq = 1 THEN excluded.tenant_id ELSE tenant_id END "
    "RETURNING flow_id, name, next_seq, tenant_id, paused"
)


def _allocate_seqs(tx: TxnCore, counts: dict[str, int], firsts: dict[str, NewEvent],
                   tenants: dict[str, Joining], paused: set[str]) -> dict[str, list[Any]]:
    """For each named flow: [flow_id, first new seq, whether it already has a head];
    `paused` gets the names of the paused ones. Raises Conflict for a flow
    that belongs to another tenant than its batch events name (the caller's
    transaction undoes the allocation)."""
    if not counts:
        return {}
    conn = tx.connection
    asked = {name: None if item.tenant is None else tenants[item.tenant].tenant_id for name, item in firsts.items()}
    if tenants:
        allocated = conn.execute(
            _ALLOCATE_WITH_TENANTS, {"counts": json.dumps({name: [n, asked[name]] for name, n in counts.items()})}
        ).fetchall()
    else:
        allocated = conn.execute(_ALLOCATE, {"counts": json.dumps(counts)}).fetchall()
    for _, name, _, tenant_id, _ in allocated:
        if tenant_id != asked[name]:
            raise flow_conflict(firsts[name].event_id, name, tenant_name(tx, tenant_id), firsts[name].tenant)
    paused.update(name for _, name, _, _, stopped in allocated if stopped)
    flows = {name: [flow_id, next_seq - counts[name], False] for flow_id, name, next_seq, _, _ in allocated}
    # A flow already has a head iff its last event before this batch is
    # neither acked nor discarded, or is discarded behind a head.
    last = [[slot[0], slot[1] - 1] for slot in flows.values() if slot[1] > 1]
    if last:
        busy = set()
        for flow_id, seq, state in conn.execute(
                "SELECT e.flow_id, e.seq, e.state FROM json_each(:last) AS j JOIN event AS e "
                "ON e.flow_id = json_extract(j.value, '$[0]') AND e.seq = json_extract(j.value, '$[1]') "
                "WHERE e.state != 'acked'",
                {"last": json.dumps(last)},
        ).fetchall():
            if state != "discarded" or heads.head_seq(conn, flow_id, seq + 1) <= seq:
                busy.add(flow_id)
        for slot in flows.values():
            slot[2] = slot[0] in busy
    return flows
