"""The SQL of enqueue on PostgreSQL: new events at the ends of their flows, repeats judged.

Runs inside a queue write transaction (TxnCore); never commits. Set-based:
one advisory lock per distinct id (so two enqueues of one id take turns and
the second sees the first), one read of the ids already known, the flows
locked (by flow_id, existing ones first) while their seqs are allocated,
one read of which flows already have a head, one insert of events and
heads. It waits only for transactions on the same ids or the same flows
(an enqueue, or a settle of a flow's last event), never for another flow's:
a transaction left open after it (the outbox) holds nothing more that
others need. Whether a repeat matches (fairq.kernel.rules.check_repeat) and where a new
head joins the rotation (fairq.kernel.rules.join_pass) are the rules' to say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ...kernel import rules
from ..backend import NewEvent
from ...kernel.rows import StoredId, enqueued, fresh_events, placed
from ...types import Enqueued
from .txn import TxnCore

#: Advisory lock space of event ids being enqueued (the second key is the id's hash).
_ID_LOCK_SPACE = 0x6672


def enqueue_many(tx: TxnCore, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
    """Store each new event at the end of its flow; identical repeats collapse.
    Any conflict raises before anything is written."""
    ids = sorted({item.event_id for item in items})
    # Enqueues of one id take turns (in hash order, so never in a cycle);
    # the later one reads the earlier one's row once it has committed.
    tx.execute("SELECT pg_advisory_xact_lock(%(space)s, h) FROM "
               "(SELECT DISTINCT hashtext(x) AS h FROM unnest(%(ids)s::text[]) AS x ORDER BY 1) AS s",
               {"space": _ID_LOCK_SPACE, "ids": ids})
    # An event id names one (flow, body) forever, and so does a purged id
    # while its tombstone is kept (an id is never in both tables).
    stored = {
        row[0]: StoredId(row[0], row[1], int(row[2]), row[3] if row[3] is not None else bytes(row[4]))
        for row in tx.execute(
            "SELECT e.event_id, f.name, e.seq, e.body, NULL::bytea FROM event AS e "
            "LEFT JOIN flow AS f ON f.flow_id = e.flow_id WHERE e.event_id = ANY(%(ids)s::text[]) "
            "UNION ALL "
            "SELECT t.event_id, f.name, t.seq, NULL::text, t.body_hash FROM tombstone AS t "
            "LEFT JOIN flow AS f ON f.flow_id = t.flow_id WHERE t.event_id = ANY(%(ids)s::text[])",
            {"ids": ids},
        )
    }
    fresh = fresh_events(items, stored)
    seqs = _insert_events(tx, list(fresh.values()), now_ms) if fresh else {}
    return enqueued(items, stored, seqs)


def _insert_events(tx: TxnCore, items: list[NewEvent], now_ms: int) -> dict[str, int]:
    """Insert new events; returns their seqs. An event that finds its flow
    idle becomes its head and joins the rotation behind every flow in it."""
    flows = _allocate_seqs(tx, Counter(item.flow for item in items if item.flow is not None))
    tail = tx.rotation()[1]
    events: dict[str, list[Any]] = {k: [] for k in ("event_id", "flow_id", "seq", "body", "next_at")}
    heads: list[tuple[str, int | None, int, bool]] = []  # (event_id, flow_id, dispatch_ms, runnable)
    seqs = {}
    for p in placed(items, flows, now_ms):
        for key, value in (("event_id", p.item.event_id), ("flow_id", p.flow_id), ("seq", p.seq),
                           ("body", p.item.body), ("next_at", p.next_at_ms)):
            events[key].append(value)
        if p.head:
            heads.append((p.item.event_id, p.flow_id, p.next_at_ms, p.next_at_ms <= now_ms))
        seqs[p.item.event_id] = p.seq
    # New events are ready; only heads get a rotation place (the tail, turns
    # taken in batch order) and a dispatch time, in the same statement.
    tx.execute(
        "WITH new AS (INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms) "
        "SELECT n.event_id, n.flow_id, n.seq, n.body, 'ready', %(now_ms)s, n.next_at, n.next_at "
        "FROM unnest(%(event_id)s::text[], %(flow_id)s::bigint[], %(seq)s::bigint[], %(body)s::text[], "
        "%(next_at)s::bigint[]) WITH ORDINALITY AS n(event_id, flow_id, seq, body, next_at, i) ORDER BY n.i "
        "RETURNING id, event_id, flow_id), "
        "h AS (SELECT h.event_id, h.dispatch_ms, h.runnable, nextval('turn_seq') AS turn "
        "FROM unnest(%(h_event_id)s::text[], %(h_dispatch)s::bigint[], %(h_runnable)s::boolean[]) "
        "WITH ORDINALITY AS h(event_id, dispatch_ms, runnable, i) ORDER BY h.i) "
        "INSERT INTO head (event_pk, flow_id, pass, turn, dispatch_ms, runnable) "
        "SELECT new.id, new.flow_id, %(pass)s, h.turn, h.dispatch_ms, h.runnable FROM new "
        "JOIN h ON h.event_id = new.event_id",
        {**events, "now_ms": now_ms, "pass": rules.join_pass(tail),
         "h_event_id": [h[0] for h in heads], "h_dispatch": [h[2] for h in heads],
         "h_runnable": [h[3] for h in heads]},
    )
    tx.wake(sum(1 for h in heads if h[3]))
    tx.due_later([h[2] for h in heads], now_ms)
    tx.moved(None, "ready", len(items))
    tx.happened("enqueued", len(items))
    return seqs


def _allocate_seqs(tx: TxnCore, counts: Counter[str]) -> dict[str, list[Any]]:
    """For each named flow: [flow_id, first new seq, whether it already has a head]."""
    if not counts:
        return {}
    names = sorted(counts)
    # The flows are locked (flow before head before event, by flow_id) until
    # commit: an ack of a flow's last event and this enqueue take turns, so
    # one of them always sees the other's event or head.
    tx.execute("SELECT flow_id FROM flow WHERE name = ANY(%(names)s::text[]) ORDER BY flow_id FOR NO KEY UPDATE",
               {"names": names})
    # Each flow hands out its next `count` seqs; a new flow starts at 1.
    allocated = tx.execute(
        "INSERT INTO flow (name, next_seq) SELECT c.name, 1 + c.n "
        "FROM unnest(%(names)s::text[], %(ns)s::bigint[]) AS c(name, n) ORDER BY c.name "
        "ON CONFLICT (name) DO UPDATE SET next_seq = flow.next_seq + excluded.next_seq - 1 "
        "RETURNING flow_id, name, next_seq",
        {"names": names, "ns": [counts[n] for n in names]},
    ).fetchall()
    flows = {name: [int(flow_id), int(next_seq) - counts[name], False] for flow_id, name, next_seq in allocated}
    # A flow has a head iff it has unacked work; the flow lock keeps it so.
    busy = {int(row[0]) for row in tx.execute(
        "SELECT flow_id FROM head WHERE flow_id = ANY(%(ids)s::bigint[])",
        {"ids": [slot[0] for slot in flows.values()]})}
    for slot in flows.values():
        slot[2] = slot[0] in busy
    return flows
