"""The SQL of enqueue: new events at the ends of their flows, repeats judged.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
Set-based: one read of the ids already known, one seq allocation for every
flow in the batch, one read of which flows already have a head, one insert.
A single event of a flow of its own is one insert that writes nothing when
its id is known (then read and judged as above).
Whether a repeat matches (fairq.kernel.rules.check_repeat) and where a new head
joins the rotation (fairq.kernel.rules.join_pass) are the rules' to say.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...kernel import rules
from ..backend import NewEvent
from ...kernel.rows import StoredId, enqueued, fresh_events, placed, ready_at
from ...types import Enqueued
from .txn import TxnCore


# An event id names one (flow, body) forever: a repeat must match it, and
# so must a repeat of a purged id, while its tombstone is kept (an id is
# never in both tables). Both read by the event_id indexes.
_KNOWN = (
    "SELECT e.event_id, f.name, e.seq, e.body FROM event AS e "
    "LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
    "WHERE e.event_id IN (SELECT value FROM json_each(:ids)) "
    "UNION ALL "
    "SELECT t.event_id, f.name, t.seq, t.body_hash FROM tombstone AS t "
    "LEFT JOIN flow AS f ON f.flow_id = t.flow_id "
    "WHERE t.event_id IN (SELECT value FROM json_each(:ids))"
)
_KNOWN_ONE = (
    "SELECT e.event_id, f.name, e.seq, e.body FROM event AS e "
    "LEFT JOIN flow AS f ON f.flow_id = e.flow_id WHERE e.event_id = :id "
    "UNION ALL "
    "SELECT t.event_id, f.name, t.seq, t.body_hash FROM tombstone AS t "
    "LEFT JOIN flow AS f ON f.flow_id = t.flow_id WHERE t.event_id = :id"
)


# A new id of a flow of its own becomes that flow's head (seq 1) at the end
# of the rotation; an id already stored or tombstoned inserts nothing (and
# is judged by _KNOWN_ONE). Positional parameters, in the column order.
_INSERT_OWN_FLOW = (
    "INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms, "
    "pass, turn, dispatch_ms, runnable) SELECT ?1, NULL, 1, ?2, 'ready', ?3, ?4, ?4, ?5, ?6, ?4, ?7 "
    "WHERE NOT EXISTS (SELECT 1 FROM tombstone WHERE event_id = ?1) "
    "ON CONFLICT (event_id) DO NOTHING"
)


def enqueue_many(tx: TxnCore, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
    """Store each new event at the end of its flow; identical repeats collapse.

    Any conflict raises before anything is written.
    """
    if len(items) == 1 and items[0].flow is None and _insert_own_flow(tx, items[0], now_ms):
        return [Enqueued(items[0].event_id, None, 1, True)]  # a new flow's first seq
    if len(items) == 1:  # one id: looked up by value, without a JSON list
        found = tx.connection.execute(_KNOWN_ONE, {"id": items[0].event_id})
    else:
        found = tx.connection.execute(_KNOWN, {"ids": json.dumps([item.event_id for item in items])})
    stored = {row[0]: StoredId._make(row) for row in found}
    fresh = fresh_events(items, stored)
    seqs = _insert_events(tx, list(fresh.values()), now_ms) if fresh else {}
    return enqueued(items, stored, seqs)


def _insert_own_flow(tx: TxnCore, item: NewEvent, now_ms: int) -> bool:
    """Insert one event of a flow of its own if its id is new (one statement
    where a lookup and an insert would be two); False: the id is known, and
    nothing was written."""
    row = tx.state_row()
    next_at = ready_at(item, now_ms)
    turn = row.turn + 1  # taken below only if the insert happened
    inserted = tx.cursor.execute(
        _INSERT_OWN_FLOW,
        (item.event_id, item.body, now_ms, next_at, rules.join_pass(row.tail), turn, int(next_at <= now_ms)),
    ).rowcount
    if not inserted:
        return False
    taken = tx.next_turn()
    assert taken == turn
    tx.moved(None, "ready")
    tx.happened("enqueued")
    return True


def _insert_events(tx: TxnCore, items: list[NewEvent], now_ms: int) -> dict[str, int]:
    """Insert new events; returns their seqs. An event that finds its flow
    idle becomes its head and joins the rotation behind every flow in it."""
    row = tx.state_row()
    counts: dict[str, int] = {}  # events per named flow in this batch
    for item in items:
        if item.flow is not None:
            counts[item.flow] = counts.get(item.flow, 0) + 1
    flows = _allocate_seqs(tx, counts) if counts else {}
    rows: list[tuple[Any, ...]] = []
    seqs = {}
    for p in placed(items, flows, now_ms):
        item, next_at = p.item, p.next_at_ms
        if p.head:
            rows.append((item.event_id, p.flow_id, p.seq, item.body, now_ms, next_at, next_at,
                         rules.join_pass(row.tail), tx.next_turn(), next_at, int(next_at <= now_ms)))
        else:
            rows.append((item.event_id, p.flow_id, p.seq, item.body, now_ms, next_at, next_at,
                         None, None, None, 0))
        seqs[item.event_id] = p.seq
    # Only heads get a rotation place and a dispatch time. Positional
    # parameters, in the column order: the hottest insert, where binding
    # eleven named ones cost ~4 us a row.
    tx.connection.executemany(
        "INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms, "
        "pass, turn, dispatch_ms, runnable) VALUES (?, ?, ?, ?, 'ready', ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    tx.moved(None, "ready", len(rows))
    tx.happened("enqueued", len(rows))
    return seqs


def _allocate_seqs(tx: TxnCore, counts: dict[str, int]) -> dict[str, list[Any]]:
    """For each named flow: [flow_id, first new seq, whether it already has a head]."""
    if not counts:
        return {}
    conn = tx.connection
    # Each flow hands out its next `count` seqs; a new flow starts at 1.
    allocated = conn.execute(
        "INSERT INTO flow (name, next_seq) SELECT key, 1 + value FROM json_each(:counts) WHERE true "
        "ON CONFLICT (name) DO UPDATE SET next_seq = next_seq + excluded.next_seq - 1 "
        "RETURNING flow_id, name, next_seq",
        {"counts": json.dumps(counts)},
    ).fetchall()
    flows = {name: [flow_id, next_seq - counts[name], False] for flow_id, name, next_seq in allocated}
    # A flow already has a head iff its last event before this batch is
    # unacked (its unacked events are a suffix).
    last = [[slot[0], slot[1] - 1] for slot in flows.values() if slot[1] > 1]
    if last:
        busy = {
            row[0]
            for row in conn.execute(
                "SELECT e.flow_id FROM json_each(:last) AS j JOIN event AS e "
                "ON e.flow_id = json_extract(j.value, '$[0]') AND e.seq = json_extract(j.value, '$[1]') "
                "WHERE e.state != 'acked'",
                {"last": json.dumps(last)},
            )
        }
        for slot in flows.values():
            slot[2] = slot[0] in busy
    return flows
