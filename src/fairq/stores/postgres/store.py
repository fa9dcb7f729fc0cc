"""The PostgreSQL queue store: PgStore (fairq.stores.backend.Store) and PgTxn
(fairq.stores.backend.WriteTxn), one method per verb.

PgStore opens one connection, creates or upgrades the schema (unless
readonly), refuses an open whose clock is not the queue's, and hands out
transactions and read snapshots. PgTxn runs each
verb's SQL (claim, enqueue_one, verbs, settle, maintenance, tenants) inside one transaction that
txn.TxnCore keeps. The invariants are the SQLite store's (fairq.stores.sqlite.store):
a flow's head is its lowest unacked event and has exactly one head row;
a head row's dispatch_ms is its next_at while ready, its lease end while
inflight, NULL while quarantined; runnable heads are due; the counters'
shards sum to the number of events in each state. Decisions come from
fairq.kernel.rules and fairq.kernel.policy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..backend import NewEvent, SettleItem, StoredResult
from ...errors import InvalidInput, LeaseLost, RedriveRefused, UsageError
from ...kernel.policy import Policy, to_ms
from ...types import ClockReset, Enqueued, Lease, Settled, TenantInfo
from . import claim, enqueue_one, maintenance, operators, results, settle, tenants, verbs
from .connection import PgDatabase
from .listen import Listener, connector
from .result_listen import ResultListener
from .policy_store import change_policy, store_policy
from .reads import PgReads
from .schedules import PgSchedules
from .schema import ENQUEUE_VERSION, VERBS_VERSION, ensure_schema, require_current
from .txn import SERVER_CLOCK_MESSAGE, TxnCore

__all__ = ["PgStore", "PgTxn"]

T = TypeVar("T")


class PgStore:
    """A queue in a PostgreSQL schema: opens it, migrates it, hands out transactions."""

    def __init__(self, url: str, *, readonly: bool = False, policy: Policy | None = None,
                 server_clock: bool = True) -> None:
        """readonly: never create or migrate; every transaction is read-only.
        policy: stored if this open creates the tables. server_clock: run at
        the database server's time (else the stored model clock); stored if
        this open creates the tables, else it must be the queue's (UsageError)."""
        self.db = PgDatabase(url, readonly=readonly)
        self._target = url  # the URL as given: a listener connects with its password too
        self.server_clock = server_clock
        seed = None if policy is None else functools.partial(store_policy, policy=policy)
        try:
            self.version, stored = (require_current(self.db) if readonly
                                    else ensure_schema(self.db, seed, clock_name(server_clock)))
            if stored is not None and stored != clock_name(server_clock):
                raise UsageError(
                    f"{self.db.url} is a queue on the {stored} clock, opened here with the "
                    f"{clock_name(server_clock)} clock: one queue's leases and due times are measured by one "
                    f"clock; open it with clock={stored!r}" + (" (or a callable clock)" if stored == "model" else ""))
        except BaseException:
            self.db.close()
            raise

    @property
    def parallel_calls(self) -> int:
        """The pool's size (fairq_pool): calls that run at once, each on a connection of its own."""
        return self.db.pool_size

    @property
    def url(self) -> str:
        """The database URL, without its password."""
        return self.db.url

    def close(self) -> None:
        self.db.close()

    def reconnect(self) -> None:
        """A new connection in place of this store's own, now (a lost one is
        replaced on the next call anyway); Unavailable while out of reach."""
        self.db.reconnect()

    def transaction(self, name: str, conn: Any | None = None) -> PgTxn:
        """``with store.transaction(name) as tx:`` -- a write transaction. With
        `conn` (a psycopg connection in the application's open transaction)
        the writes join it and commit with it (the outbox)."""
        return PgTxn(self.db, name, conn, server_clock=self.server_clock,
                     one_statement=self.version >= (ENQUEUE_VERSION if name == "enqueue" else VERBS_VERSION))

    def read(self, fn: Callable[[PgReads], T]) -> T:
        """fn(reads) on one read-only snapshot."""
        return self.db.read(lambda conn: fn(PgReads(conn, server_clock=self.server_clock)))

    def wakeups(self) -> Listener:
        """A new Listener on its own connection: NOTIFY of claimable work, and due times."""
        return Listener(connector(self._target), due=self.earliest_ready_ms)

    def result_waits(self) -> ResultListener | None:
        """A new ResultListener on its own connection (None on a read-only queue,
        which cannot register a wait: its waits poll)."""
        return None if self.db.readonly else ResultListener(connector(self._target), self.db)

    def settled_look(self, event_id: str) -> StoredResult | None:
        """The event's state and result once every settle of it that has begun has ended."""
        if self.db.readonly:
            return self.read(lambda reads: reads.result(event_id))
        return results.locked_result(self.db, event_id)

    def earliest_ready_ms(self) -> int | None:
        """When the next waiting head becomes claimable (ms of the queue's
        clock), None when no head waits: how long a worker may sleep."""
        return self.read(lambda reads: reads.earliest_ready_ms())


def clock_name(server_clock: bool) -> str:
    """How the queue's clock is stored and named: "server" or "model"."""
    return "server" if server_clock else "model"


#: The verbs that run as one statement (claim.py, verbs.py, enqueue_one.py)
#: when their transaction is fairq's own and nothing else runs in it (a
#: settle with an effect, or a verb joined to an application's transaction,
#: calls the same function inside its transaction; extend runs from Python).
#: tests/postgres/test_pg_one_statement.py empties it to compare the two.
ONE_STATEMENT: frozenset[str] = frozenset({"claim", "settle", "extend", "enqueue", "discard", "pause", "resume"})

class PgTxn(TxnCore):
    """Every verb, bound to one transaction (a context manager). An enqueue,
    claim, settle or extend on fairq's own connection begins nothing until it
    knows what it runs: the verb alone is one statement (claim.py, verbs.py,
    enqueue_one.py); anything else (a settle effect, a fence check) begins
    the transaction as before, and the verb calls the same function inside it."""

    def __init__(self, db: PgDatabase, name: str, conn: Any, *, server_clock: bool,
                 one_statement: bool = True) -> None:
        super().__init__(db, name, conn, server_clock=server_clock)
        self._lazy = one_statement and conn is None and name in ONE_STATEMENT
        self._begun = False
        self._requested: tuple[int, bool] | None = None  # the time asked for, before anything began
        self._provisional: int | None = None  # what now() answered then
        self._fixed: int | None = None  # the time fixed when the transaction began

    def __enter__(self) -> PgTxn:
        if not self._lazy:
            self._begin()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return super().__exit__(*exc) if self._begun else None

    def _begin(self) -> None:
        if self._begun:
            return
        self._begun = True
        super().__enter__()
        if self._requested is not None:
            self._fixed = TxnCore.now(self, *self._requested)

    def _one_statement(self) -> tuple[int, bool] | None:
        """The time asked for, if this verb may run as one statement (then
        nothing else may run in this transaction)."""
        if self._begun or self._requested is None:
            return None
        self._lazy = False
        return self._requested

    def _at(self, now_ms: int) -> int:
        """The time of a verb run from Python: fixed when the transaction began."""
        self._begin()
        return self._fixed if self._fixed is not None and now_ms == self._provisional else now_ms

    def execute(self, sql: str, params: Any = None) -> Any:
        self._begin()
        return super().execute(sql, params)

    def run_callback(self, fn: Callable[[Any], Any], what: str) -> Any:
        self._begin()
        return super().run_callback(fn, what)

    def now(self, requested_ms: int, explicit: bool) -> int:
        if self._begun or not self._lazy:
            return super().now(requested_ms, explicit)
        if self.server_clock and explicit:
            raise InvalidInput("now", SERVER_CLOCK_MESSAGE)
        # Provisional: the statement (or the transaction, once begun) fixes the time.
        self._requested, self._provisional = (requested_ms, explicit), requested_ms
        return requested_ms

    def stored_now(self) -> int:
        self._begin()
        return super().stored_now()

    def policy(self) -> Policy:
        self._begin()
        return super().policy()

    def _lease_ms(self, lease_ms: int | None) -> int:
        """The call's lease, or the stored policy's (a verb run from Python)."""
        return to_ms(self.policy().lease_seconds) if lease_ms is None else lease_ms

    def enqueue_many(self, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
        requested = self._one_statement()
        if requested is not None:
            return enqueue_one.call_enqueue(self, items, requested=requested)
        # Inside a transaction (the outbox): the same function, run in it.
        return enqueue_one.call_enqueue(self, items, requested=(self._at(now_ms), False), in_txn=True)

    def set_policy(self, new: Policy, *, reason: str | None, actor: str | None, now_ms: int) -> Policy:
        """Store `new` as the next policy version with one audit row
        ("policy_set", the policy before and after); unchanged: no write."""
        before, after = change_policy(self.connection, new)
        self._policy = after
        self.record_policy_change(before, after, reason=reason, actor=actor, now_ms=now_ms)
        return after

    def claim_many(self, n: int, *, owner: str | None, now_ms: int, lease_ms: int | None) -> list[Lease]:
        requested = self._one_statement()
        if requested is not None:  # the statement reads the stored policy in its own transaction
            return claim.call_claim(self, n, owner=owner, requested=requested, lease_ms=lease_ms)
        return claim.call_claim(self, n, owner=owner, requested=(self._at(now_ms), False), lease_ms=lease_ms,
                                in_txn=True)

    def check_fence(self, event_id: str, generation: int, now_ms: int) -> None:
        settle.check_fence(self, event_id, generation, self._at(now_ms))

    def settle_many(self, items: Sequence[SettleItem], *, now_ms: int) -> list[Settled | LeaseLost]:
        requested = self._one_statement()
        if requested is not None:
            return verbs.call_settle(self, items, requested=requested)
        return verbs.call_settle(self, items, requested=(self._at(now_ms), False), in_txn=True)

    def extend(self, event_id: str, generation: int, *, lease_ms: int | None, now_ms: int) -> Lease:
        requested = self._one_statement()
        if requested is not None:
            return verbs.call_extend(self, event_id, generation, requested=requested, lease_ms=lease_ms)
        now_ms = self._at(now_ms)
        return settle.extend(self, event_id, generation, lease_ms=self._lease_ms(lease_ms), now_ms=now_ms)

    def redrive_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Give each quarantined head a new round; its new generation or refusal in its slot."""
        return settle.redrive_many(self, items, reason=reason, actor=actor, now_ms=now_ms)

    def discard_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Discard each ready or quarantined event; its new generation or refusal in its slot."""
        requested = self._one_statement()
        if requested is not None:
            return operators.call_discard(self, items, reason=reason, actor=actor, requested=requested)
        return operators.call_discard(self, items, reason=reason, actor=actor, requested=(self._at(now_ms), False),
                                      in_txn=True)

    def set_paused(self, flow: str, paused: bool, *, reason: str | None, actor: str | None, now_ms: int) -> bool:
        """Pause or resume a named flow, audited; False when it already was so."""
        requested = self._one_statement()
        if requested is not None:
            return operators.call_set_paused(self, flow, paused, reason=reason, actor=actor, requested=requested)
        return operators.call_set_paused(self, flow, paused, reason=reason, actor=actor,
                                         requested=(self._at(now_ms), False), in_txn=True)

    def set_weight(self, name: str, weight: int) -> None:
        """Set a flow's weight, creating the flow if it has never been seen."""
        # Only the weight changes; a new flow's seqs start at 1.
        self.execute("INSERT INTO flow (name, weight) VALUES (%(name)s, %(weight)s) "
                     "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight", {"name": name, "weight": weight})

    def store_results(self, items: Sequence[tuple[str, str]], *, now_ms: int) -> None:
        """Store each result in this transaction, which the settle before it has begun
        (a "settle_result" transaction is never one statement)."""
        results.store_results(self, items, now_ms=self._at(now_ms))

    def reset_clock(self, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
        return maintenance.reset_clock(self, to_ms, reason=reason, actor=actor)

    def purge_acked(self, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
        return maintenance.purge_acked(self, after_id, chunk=chunk, acked_before_ms=acked_before_ms)

    def drop_tombstones(self, acked_before_ms: int, *, limit: int) -> int:
        return maintenance.drop_tombstones(self, acked_before_ms, limit=limit)

    def schedules(self) -> PgSchedules:
        return PgSchedules(self.connection)

    def set_tenant(self, name: str, *, weight: int | None, max_inflight: int | None, rate: int | None,
                   burst: int | None, reason: str | None, actor: str | None, now_ms: int) -> TenantInfo:
        """Create or change a tenant's settings, audited (tenants.set_tenant)."""
        return tenants.set_tenant(self, name, weight=weight, max_inflight=max_inflight, rate=rate, burst=burst,
                                  reason=reason, actor=actor, now_ms=self._at(now_ms))
