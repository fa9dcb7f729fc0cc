"""An operator's decisions on PostgreSQL, one statement each: discard_many
(migrations/operators.sql's fairq_discard) and pause/resume
(fairq_set_paused), in autocommit like the common verbs (verbs.run), or
inside a transaction already begun. The functions judge and write; what
stays here is the refusal, worded by fairq.kernel.discards from the stored
values the function returns, and the reads of a flow's pause.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import RedriveRefused
from ...kernel.discards import discard_refusal
from ...kernel.records import Pause
from ...kernel.tenants import Bucket, blocked_by
from .txn import TxnCore, fold
from .verbs import committed, refused_time, run

# Discard each (event_id, expected_generation), each alone: one row per item.
_DISCARD = ("SELECT * FROM fairq_discard(%(ids)s::text[], %(gens)s::bigint[], %(reason)s, %(actor)s, %(model)s, "
            "%(requested)s, %(explicit)s, %(fold)s)")
# Pause or resume a named flow: one row.
_SET_PAUSED = ("SELECT * FROM fairq_set_paused(%(flow)s, %(paused)s, %(reason)s, %(actor)s, %(model)s, "
               "%(requested)s, %(explicit)s, %(fold)s)")


def call_discard(tx: TxnCore, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                 requested: tuple[int, bool], in_txn: bool = False) -> list[int | RedriveRefused]:
    """discard_many in one statement: each slot the new generation or its refusal."""
    params: dict[str, Any] = {"ids": [i for i, _ in items], "gens": [g for _, g in items], "reason": reason,
                              "actor": actor, "model": not tx.server_clock, "requested": requested[0],
                              "explicit": requested[1], "fold": fold()}
    rows = run(tx, "discard", _DISCARD, params, in_txn)
    refused_time(rows, requested, 6)
    committed("discard", in_txn)
    out: list[int | RedriveRefused] = []
    for (event_id, expected), (kind, state, generation, owner, until, _now, _stored) in zip(items, rows):
        if kind == "discarded":
            out.append(int(generation))
        else:
            refused = discard_refusal(event_id, expected, state=state, generation=generation, owner=owner,
                                      lease_until_ms=until)
            assert refused is not None, f"fairq_discard refused {event_id!r} as it stands: {state}"
            out.append(refused)
    return out


def call_set_paused(tx: TxnCore, flow: str, paused: bool, *, reason: str | None, actor: str | None,
                    requested: tuple[int, bool], in_txn: bool = False) -> bool:
    """Pause or resume a flow in one statement; False when it already was so (nothing written)."""
    rows = run(tx, "pause" if paused else "resume", _SET_PAUSED,
               {"flow": flow, "paused": paused, "reason": reason, "actor": actor, "model": not tx.server_clock,
                "requested": requested[0], "explicit": requested[1], "fold": fold()}, in_txn)
    refused_time(rows, requested, 2)
    committed("pause" if paused else "resume", in_txn)
    return bool(rows[0][0])


def read_pause(conn: Any, flow: str) -> Pause | None:
    """The named flow's pause while it is paused, by the flow name's key."""
    row = conn.execute("SELECT pause_reason, pause_actor, paused_ms FROM flow WHERE name = %(flow)s AND paused",
                       {"flow": flow}).fetchone()
    return None if row is None else Pause(row[0], row[1], int(row[2]))


# The heads a claim could take at now, by tenant (NULL: untenanted), each
# tenant with what its limits are judged by: its settings and bucket, its
# live leases and their earliest end. Bounded by the claimable heads: the
# runnable ones through head_rotation and head_tenant_rotation, the due ones
# not yet promoted through head_waiting (which leaves paused flows' heads
# out; a quarantined head is in neither).
_CLAIMABLE = (
    "WITH due AS (SELECT h.tenant_id FROM head AS h WHERE h.runnable AND h.tenant_id IS NULL "
    "UNION ALL SELECT h.tenant_id FROM head AS h WHERE h.runnable AND h.tenant_id IS NOT NULL "
    "UNION ALL SELECT h.tenant_id FROM head AS h WHERE NOT h.runnable AND h.dispatch_ms <= %(now)s "
    "AND NOT h.paused), "
    "g AS (SELECT d.tenant_id, count(*) AS n FROM due AS d GROUP BY d.tenant_id) "
    "SELECT g.n, g.tenant_id IS NOT NULL, t.max_inflight, t.rate, t.burst, t.tokens_milli, t.at_ms, l.n, l.lease_end "
    "FROM g LEFT JOIN tenant AS t ON t.tenant_id = g.tenant_id "
    "LEFT JOIN LATERAL (SELECT count(*) AS n, min(h.dispatch_ms) AS lease_end FROM head AS h "
    "JOIN event AS e ON e.id = h.event_pk WHERE h.tenant_id = g.tenant_id AND h.dispatch_ms > %(now)s "
    "AND NOT h.runnable AND e.state = 'inflight') AS l ON true")
# Flows an operator must act on: a quarantined head (no dispatch time,
# through head_quarantined) or a paused flow's head (through head_paused),
# each head once.
_BLOCKED = "SELECT count(*) FROM head WHERE dispatch_ms IS NULL OR paused"


def read_counts(conn: Any, now_ms: int) -> tuple[int, int]:
    """(claimable_now, blocked_flows) at now_ms: heads a claim could take now
    (a tenant's only while kernel.tenants.blocked_by lets it be claimed), and
    flows whose head waits for an operator."""
    claimable = 0
    for n, tenanted, cap, rate, burst, tokens, at_ms, live, lease_end in conn.execute(_CLAIMABLE, {"now": now_ms}):
        if tenanted and blocked_by(now_ms, inflight=int(live), max_inflight=int(cap),
                                   bucket=None if tokens is None else Bucket(int(tokens), int(at_ms)),
                                   rate=int(rate), burst=int(burst),
                                   lease_end_ms=None if lease_end is None else int(lease_end)) is not None:
            continue
        claimable += int(n)
    blocked = int(conn.execute(_BLOCKED).fetchone()[0])
    return claimable, blocked


__all__ = ["call_discard", "call_set_paused", "read_pause", "read_counts"]
