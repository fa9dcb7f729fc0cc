"""The claim verb on PostgreSQL: lease the next heads in rotation order,
fairly, with many claimers at once, through migrations/verbs.sql's
fairq_claim -- one statement in autocommit (its own transaction, one round
trip), or inside a transaction that is already open (an application's: the
outbox), where it runs the same function (verbs.run).

The function holds every rule of the claim (promotion, the two-level pick
of the untenanted head or the tenant with the lowest place, the tenant
limits, the judging of each head, the rotation step; see its comment).
What stays here: decoding each leased body (a head whose body this process
cannot decode is quarantined, fenced on the lease just taken: by a second
transaction after a one-statement claim, in the same one otherwise) and
turning the rows into Leases.

Crash points: `claim.before_commit` is passed before the statement is
sent, `claim.after_commit` once its answer has arrived (it committed).
"""

from __future__ import annotations

from ..._json import body_value
from ...kernel.claims import quarantine_leased
from ...types import Lease, UndecodableBody
from .txn import TxnCore, fold
from .verbs import committed, refused_time, run

# Lease up to n heads (fairq_claim): one row per lease, or one refusal row.
_CLAIM = ("SELECT * FROM fairq_claim(%(n)s, %(owner)s, %(model)s, %(requested)s, %(explicit)s, "
          "%(lease_ms)s, %(max_attempts)s, %(fold)s)")


def call_claim(tx: TxnCore, n: int, *, owner: str | None, requested: tuple[int, bool],
               lease_ms: int | None, in_txn: bool = False) -> list[Lease]:
    """claim_many in one statement, judged by the stored policy; lease_ms None: its lease."""
    rows = run(tx, "claim", _CLAIM, {
        "n": n, "owner": owner, "model": not tx.server_clock, "requested": requested[0],
        "explicit": requested[1], "lease_ms": lease_ms, "max_attempts": None, "fold": fold()}, in_txn)
    refused_time(rows, requested, 9)
    committed("claim", in_txn)
    leases: list[Lease] = []
    undecodable: list[tuple[Lease, UndecodableBody]] = []
    for event_id, flow, seq, body, generation, attempts, lifetime, until, _now, _stored, kind, timeout_ms in rows:
        lease = Lease(event_id, flow, int(seq), body_value(body), int(generation), int(attempts), int(lifetime),
                      owner, int(until) / 1000, kind, None if timeout_ms is None else int(timeout_ms) / 1000)
        if isinstance(lease.body, UndecodableBody):
            undecodable.append((lease, lease.body))
            continue
        leases.append(lease)
    if undecodable and in_txn:
        # Leased in this transaction: quarantined in it.
        ids = [lease.event_id for lease, _ in undecodable]
        pks = dict(tx.execute("SELECT event_id, id FROM event WHERE event_id = ANY(%(ids)s::text[])",
                              {"ids": ids}).fetchall())
        quarantine_leased(tx, [(pks[lease.event_id], lease, value) for lease, value in undecodable],
                          int(rows[0][8]))
    elif undecodable:
        _quarantine_undecodable(tx, undecodable, requested)
    return leases


def _quarantine_undecodable(tx: TxnCore, found: list[tuple[Lease, UndecodableBody]],
                            requested: tuple[int, bool]) -> None:
    """Quarantine heads this claim leased whose body this process cannot
    decode, in a second transaction, each only while its lease is the one
    this claim took (fenced on generation, state and lease end)."""
    with TxnCore(tx.db, "claim", None, server_clock=tx.server_clock) as second:
        now_ms = second.now(*requested)
        ids = [lease.event_id for lease, _ in found]
        # The heads judged, locked in event order (as a settle locks them).
        second.execute("SELECT event_pk FROM head WHERE event_pk IN (SELECT id FROM event "
                       "WHERE event_id = ANY(%(ids)s::text[])) ORDER BY event_pk FOR UPDATE", {"ids": ids})
        # Only an event still under the lease this claim took.
        live = dict(second.execute(
            "SELECT e.event_id, e.id FROM event AS e JOIN unnest(%(ids)s::text[], %(gen)s::bigint[]) "
            "AS c(event_id, gen) ON e.event_id = c.event_id AND e.generation = c.gen AND e.state = 'inflight'",
            {"ids": ids, "gen": [lease.generation for lease, _ in found]}).fetchall())
        quarantine_leased(second, [(live[lease.event_id], lease, value) for lease, value in found
                                   if lease.event_id in live], now_ms)


