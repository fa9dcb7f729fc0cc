"""The common verbs on PostgreSQL as one statement each: call_settle and
call_extend (and claim.call_claim) call the server-side functions of migrations/verbs.sql
(since schema step 4) in autocommit, so the call is its own
transaction and one round trip, BEGIN and COMMIT included.

Used by PgTxn (store) when a verb runs on fairq's own connection with
nothing else in its transaction. A claim or settle inside a transaction
(joined to an application's: the outbox; or a settle with an effect) calls
the same function inside it (in_txn: `run`), so each rule is written once;
in an application's transaction its bookkeeping goes to rows of its own
(the setting fairq.outbox, which the functions read). The functions evaluate the same rules
(fairq.kernel.rules, fairq.kernel.policy; tests/postgres/test_pg_rules_sql.py checks them
side by side) and leave the same bookkeeping (fairq_bookkeep: the same
writes as TxnCore's flush, which keeps its own statement for a schema from
before step 4). What stays in Python: the jitter draw of a backoff (policy.jitter_draw: sent
with the call for the attempts the caller's lease carries, SettleItem.attempts;
a call that finds other attempts stored, or none given, asks for the draw
and is made again), and the errors a lost lease raises (rules.fence on the
stored values the function returns).

Crash points: `<verb>.before_commit` is passed before the statement is
sent, `<verb>.after_commit` once its answer has arrived (it committed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import _crash
from ...kernel import policy, rules
from ..backend import SettleItem
from ...errors import LeaseExpired, LeaseLost, StaleLease, StoreError
from ...kernel.policy import from_ms, to_ms
from ..._json import body_value
from ...types import Lease, Outcome, Settled, State
from .txn import TxnCore, fold

# -- running a function ----------------------------------------------------------

def run(tx: TxnCore, name: str, sql: str, params: dict[str, Any], in_txn: bool) -> list[Any]:
    """The function's rows: one statement in autocommit (its own transaction),
    or inside tx's open transaction (in_txn)."""
    if not in_txn:
        return tx.db.statement(name, sql, params)
    if tx.joined:
        # In an application's transaction: bookkeeping goes to rows of its own.
        tx.execute("SELECT set_config('fairq.outbox', 'on', true)")
    return list(tx.execute(sql, {**params, "fold": 0}).fetchall())


def committed(name: str, in_txn: bool) -> None:
    """The crash point after a one-statement call's commit (none inside a transaction)."""
    if not in_txn:
        _crash.point(name, "after_commit")


def refused_time(rows: Sequence[Any], requested: tuple[int, bool], stored_at: int) -> None:
    """An explicit time before the stored clock: the ClockError effective_now raises."""
    if len(rows) == 1 and rows[0][0] is None:
        policy.effective_now(requested[0], int(rows[0][stored_at]), explicit=True)
        raise StoreError("clock", "the stored clock refused a time effective_now accepts")


# -- settle ------------------------------------------------------------------------

# Settle each lease of a batch (fairq_settle): one row per item, in order.
_SETTLE = ("SELECT * FROM fairq_settle(%(ids)s, %(gens)s, %(outcomes)s, %(reasons)s, %(delays)s, %(draws)s, "
           "%(draw_attempts)s, %(model)s, %(requested)s, %(explicit)s, %(max_attempts)s, %(base)s, %(factor)s, "
           "%(cap)s, %(jitter)s, %(fold)s)")


def call_settle(tx: TxnCore, items: Sequence[SettleItem], *, requested: tuple[int, bool],
                in_txn: bool = False) -> list[Settled | LeaseLost]:
    """settle_many in one statement (two when a retry's jitter draw was not
    known), judged by the stored policy (NULL for each of its overrides)."""
    seen = [item.attempts for item in items]
    params: dict[str, Any] = {
        "ids": [item.event_id for item in items], "gens": [item.generation for item in items],
        "outcomes": [item.outcome.value for item in items], "reasons": [item.reason for item in items],
        "delays": [None if item.delay is None else to_ms(item.delay) for item in items],
        "model": not tx.server_clock, "requested": requested[0], "explicit": requested[1],
        "max_attempts": None, "base": None, "factor": None, "cap": None, "jitter": None}
    for _ in range(2):
        # A draw is needed only by a retry that takes its delay from the backoff.
        params["draws"] = [policy.jitter_draw(item.event_id, item.generation, a)
                           if a is not None and item.outcome is Outcome.RETRY and item.delay is None else None
                           for item, a in zip(items, seen)]
        params["draw_attempts"] = seen
        rows = run(tx, "settle", _SETTLE, {**params, "fold": fold()}, in_txn)
        refused_time(rows, requested, 10)
        asked = {int(r[8]): int(r[4]) for r in rows if r[0] == "draw"}
        if not asked:
            break
        # Nothing was written: the draws for the attempts stored, and again.
        seen = [asked.get(i, a) for i, a in enumerate(seen)]
    else:
        raise StoreError("settle", "the stored attempts changed between two calls of one settle")
    committed("settle", in_txn)
    out: list[Settled | LeaseLost] = []
    for item, (kind, _event_id, state, next_at, attempts, stored_gen, until, in_batch, _i, now, _s) in zip(
            items, rows):
        if kind == "settled":
            out.append(Settled(item.event_id, State(state), from_ms(next_at), int(attempts)))
        else:
            out.append(_lost(item.event_id, item.generation, int(now), state, stored_gen, until, bool(in_batch)))
    return out


def _lost(event_id: str, generation: int, now_ms: int, state: str | None, stored_generation: int | None,
          lease_until_ms: int | None, in_batch: bool = False) -> StaleLease | LeaseExpired:
    """The error rules.fence gives on the stored values a function returned."""
    lost = rules.fence(event_id, generation, now_ms, state=state, stored_generation=stored_generation,
                       lease_until_ms=lease_until_ms, settled_in_batch=in_batch)
    if lost is None:
        raise StoreError("event", f"event {event_id!r} was refused on values the fence accepts")
    return lost


# -- extend ------------------------------------------------------------------------

# Move a live lease's end (fairq_extend): one row.
_EXTEND = ("SELECT * FROM fairq_extend(%(id)s, %(gen)s, %(model)s, %(requested)s, %(explicit)s, %(lease_ms)s)")


def call_extend(tx: TxnCore, event_id: str, generation: int, *, requested: tuple[int, bool],
           lease_ms: int | None) -> Lease:
    """extend in one statement; lease_ms None: the stored policy's."""
    rows = tx.db.statement("extend", _EXTEND, {"id": event_id, "gen": generation, "model": not tx.server_clock,
                                           "requested": requested[0], "explicit": requested[1],
                                           "lease_ms": lease_ms})
    refused_time(rows, requested, 11)
    _crash.point("extend", "after_commit")
    (kind, flow, seq, body, gen, attempts, lifetime, owner, until, state, now, _stored, task, timeout_ms) = rows[0]
    if kind != "extended":
        raise _lost(event_id, generation, int(now), state, gen, until)
    return Lease(event_id, flow, int(seq), body_value(body), int(gen), int(attempts), int(lifetime), owner,
                 int(until) / 1000, task, None if timeout_ms is None else int(timeout_ms) / 1000)
