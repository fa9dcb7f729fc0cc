"""The SQL of an operator's decisions: discard events, pause and resume a flow.

Runs inside a queue write transaction (store.txn.TxnCore); never commits.
Whether an event may be discarded, and what its audit row says, is
fairq.kernel.discards'. A discarded head hands its flow's rotation place to
the next event that is neither acked nor discarded, as an ack does. A
paused flow's head leaves the dispatch indexes (as a quarantined head does),
so a claim never reads it, whatever the number of paused flows; resume puts
it back as it would be had it never been paused. tenant.runnable follows
every head that enters or leaves the rotation, tenant.ready_n every ready
event discarded.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import RedriveRefused
from ...kernel.discards import discard_detail, discard_refusal
from . import heads
from .settle import held_rows
from .tenant_rows import Counts
from .txn import TxnCore

# Discarded is final, like acked: the event leaves every dispatch index,
# its generation moves on (no holder from before can settle it) and its
# settled time is when purge may take it.
_DISCARD = (
    "UPDATE event SET state = 'discarded', generation = :generation, next_at_ms = NULL, "
    "lease_until_ms = NULL, settled_ms = :now_ms, pass = NULL, turn = NULL, dispatch_ms = NULL, "
    "runnable = 0 WHERE id = :id AND (state = 'ready' OR state = 'quarantined')"
)


def discard_many(tx: TxnCore, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                 now_ms: int) -> list[int | RedriveRefused]:
    """Discard each (event_id, expected_generation): its new generation, or
    its refusal (nothing written for it), in its slot. Each item is judged
    on the event as the items before it left it (under the file's write
    lock, so nothing else changes it meanwhile)."""
    conn = tx.connection
    counts = Counts()
    results: list[int | RedriveRefused] = []
    for event_id, expected in items:
        tenants: dict[int, int] = {}
        paused: set[int] = set()
        row = held_rows(tx, [event_id], tenants, paused).get(event_id)
        refused = discard_refusal(event_id, expected, state=None if row is None else row.state,
                                  generation=None if row is None else row.generation,
                                  owner=None if row is None else row.owner,
                                  lease_until_ms=None if row is None else row.lease_until_ms)
        if refused is not None:
            results.append(refused)
            continue
        assert row is not None  # a missing event is refused above
        tenant = tenants.get(row.id)
        generation = row.generation + 1
        # Whether it was in a rotation index (a runnable head) before it leaves.
        was_runnable = conn.execute("SELECT runnable FROM event WHERE id = :id", {"id": row.id}).fetchone()[0]
        conn.execute(_DISCARD, {"id": row.id, "generation": generation, "now_ms": now_ms})
        counts.add(tenant, -was_runnable, ready=-1 if row.state == "ready" else 0)
        if row.pass_ is not None and row.flow_id is not None:
            # A head: the next event neither acked nor discarded takes its place.
            found = conn.execute(heads.NEXT_HEAD + " RETURNING runnable", {
                "pass": row.pass_, "turn": row.turn, "paused": int(row.id in paused), "now_ms": now_ms,
                "flow_id": row.flow_id, "seq": row.seq}).fetchone()
            counts.add(tenant, 0 if found is None else found[0])
        tx.moved(row.state, "discarded")
        tx.happened("discarded")
        tx.record(event_id, "discard", reason, actor, generation, now_ms, discard_detail(row))
        results.append(generation)
    counts.write(tx)
    return results


def set_paused(tx: TxnCore, flow: str, paused: bool, *, reason: str | None, actor: str | None,
               now_ms: int) -> bool:
    """Pause or resume a named flow (its row made if new), with one 'pause'
    or 'resume' audit row; False, and nothing written, when it already was so."""
    conn = tx.connection
    # By the flow name's unique index.
    found = conn.execute("SELECT flow_id, paused, next_seq FROM flow WHERE name = :name", {"name": flow}).fetchone()
    if found is None:
        if not paused:
            return False
        # A flow paused before its first event: its seqs start at 1.
        found = conn.execute("INSERT INTO flow (name) VALUES (:name) RETURNING flow_id, paused, next_seq",
                             {"name": flow}).fetchone()
    flow_id, was_paused, next_seq = found
    if bool(was_paused) == paused:
        return False
    # The pause and who decided it, kept while it lasts.
    conn.execute(
        "UPDATE flow SET paused = :paused, pause_reason = :reason, pause_actor = :actor, paused_ms = :now_ms "
        "WHERE flow_id = :flow_id",
        {"flow_id": flow_id, "paused": int(paused), "reason": reason if paused else None,
         "actor": actor if paused else None, "now_ms": now_ms if paused else None})
    counts = Counts()
    if paused:
        _stop_head(tx, flow_id, next_seq, counts)
    else:
        _restart_head(tx, flow_id, now_ms, counts)
    counts.write(tx)
    tx.record("", "pause" if paused else "resume", reason, actor, None, now_ms, {"flow": flow})
    return True


def _stop_head(tx: TxnCore, flow_id: int, next_seq: int, counts: Counts) -> None:
    """Take a flow's head (ready or inflight) out of the dispatch indexes; it
    keeps its rotation place."""
    conn = tx.connection
    seq = heads.head_seq(conn, flow_id, next_seq)
    if seq == next_seq:
        return  # no head: the next one is made out of them
    # The head leaves the waiting and rotation indexes (a quarantined one is in neither).
    found = conn.execute(
        "SELECT id, runnable, tenant_id FROM event WHERE flow_id = :flow_id AND seq = :seq "
        "AND state != 'quarantined'", {"flow_id": flow_id, "seq": seq}).fetchone()
    if found is None:
        return
    conn.execute("UPDATE event SET dispatch_ms = NULL, runnable = 0 WHERE id = :id", {"id": found[0]})
    counts.add(found[2], -found[1])


def _restart_head(tx: TxnCore, flow_id: int, now_ms: int, counts: Counts) -> None:
    """Put a resumed flow's head back as it would be had it never been
    paused: in its rotation place, runnable if due, else waiting for its
    time (a leased one, for its lease end)."""
    # The paused heads' index holds it.
    found = tx.connection.execute(
        "UPDATE event INDEXED BY event_paused SET dispatch_ms = coalesce(next_at_ms, lease_until_ms), "
        "runnable = state = 'ready' AND next_at_ms <= :now_ms "
        "WHERE flow_id = :flow_id AND pass IS NOT NULL AND dispatch_ms IS NULL AND state != 'quarantined' "
        "RETURNING runnable, tenant_id", {"flow_id": flow_id, "now_ms": now_ms}).fetchone()
    if found is not None:
        counts.add(found[1], found[0])
