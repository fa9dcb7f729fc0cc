"""The SQLite queue store: opens the file and hands out transactions.

SqliteStore implements fairq.stores.backend.Store and SqliteTxn fairq.stores.backend.WriteTxn
for one SQLite file: one method per verb, each running the verb's SQL (in
enqueue, claim, settle, maintenance)
inside one transaction that store.txn keeps. The facade (fairq.api.queue)
validates input, picks the time a call runs at and never sees SQL. Nothing
here commits by itself or reads a wall clock: the time comes in as
``now_ms``. Batches are set-based: a verb runs a handful of statements
whatever the number of items. Decisions come from fairq.kernel.rules and
fairq.kernel.policy.

The invariants every write keeps (the CHECKs in queue.sql hold most of them;
tests/conftest.py recounts the rest after every test):

* A flow's head is its lowest-seq event neither acked nor discarded; only
  heads have pass/turn. Acks happen in seq order; an event behind a head may
  be discarded, and every one is stored (store.heads).
* A head's dispatch_ms is its next_at while ready, its lease_until while
  inflight, NULL while quarantined or while its flow is paused.
* runnable = 1 only for heads whose dispatch_ms the clock has reached; those,
  and only those, are in the rotation index.
* queue_state's *_n columns equal the number of events in each state: every verb
  records its transitions (TxnCore.moved) and writes them with the clock.
"""

from __future__ import annotations

import os
import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..backend import NewEvent, SettleItem, StoredResult
from ...errors import LeaseLost, RedriveRefused, SchemaError
from ...kernel.policy import Policy, to_ms
from ...types import ClockReset, Enqueued, Lease, Settled, TenantInfo
from . import claim, enqueue, maintenance, operators, results, settle, tenant_rows
from .policy_store import change_policy, store_policy
from .schema import LATEST, ensure_schema, refuse_foreign, refuse_outdated
from .reads import SqliteReads
from .schedules import ScheduleTxn
from .connection import Database
from .txn import TxnCore

__all__ = ["SqliteStore", "SqliteTxn", "NewEvent", "SettleItem"]

T = TypeVar("T")


class SqliteStore:
    """A queue database file: opens it, migrates it, hands out transactions."""

    #: One writer at a time: more threads only wait for the write lock.
    parallel_calls = 1

    def __init__(self, path: Any, *, synchronous: str, busy_timeout: float, readonly: bool = False,
                 policy: Policy | None = None) -> None:
        """readonly: open an existing, current queue file without writing it;
        refuse a missing, empty, foreign or older one (SchemaError). policy:
        the retry policy stored if this open creates or upgrades the file."""
        seed = None if policy is None else functools.partial(store_policy, policy=policy)
        if readonly and not os.path.exists(path):
            raise SchemaError(f"no fairq database at {os.fsdecode(path)}; run `fairq init` or enqueue to create it")
        self.db = Database(path, synchronous=synchronous, busy_timeout=busy_timeout, readonly=readonly,
                           inspect=lambda conn: (refuse_outdated if readonly else refuse_foreign)(conn, path))
        try:
            self.version = LATEST if readonly else ensure_schema(self.db, seed)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def wakeups(self) -> None:
        """None: nothing tells of new work in a file; its workers sleep and poll."""
        return None

    def reconnect(self) -> None:
        """Nothing to do: a file has no connection to lose."""

    def result_waits(self) -> None:
        """None: nothing tells of settled events in a file; a wait polls."""
        return None

    def settled_look(self, event_id: str) -> StoredResult | None:
        """The event's state and result: a snapshot sees every committed settle."""
        return self.read(lambda reads: reads.result(event_id))

    def transaction(self, name: str, conn: sqlite3.Connection | None = None) -> SqliteTxn:
        """``with store.transaction(name) as tx:`` -- a write transaction; `name`
        labels its crash points. With `conn`, the writes join that connection's
        open transaction instead (sqlite.JoinedTransaction) and commit with it."""
        return SqliteTxn(self.db, name, conn)

    def read(self, fn: Callable[[SqliteReads], T]) -> T:
        """fn(reads) on a read-only snapshot."""
        return self.db.read(lambda conn: fn(SqliteReads(conn)))


class SqliteTxn(TxnCore):
    """Every verb, bound to one open transaction (a context manager)."""

    __slots__ = ()

    def enqueue_many(self, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
        """Store each new event at the end of its flow; identical repeats collapse.
        Any conflict raises before anything is written."""
        return enqueue.enqueue_many(self, items, now_ms)

    def set_policy(self, new: Policy, *, reason: str | None, actor: str | None, now_ms: int) -> Policy:
        """Store `new` as the next policy version with one audit row
        ("policy_set", the policy before and after); unchanged: no write."""
        before, after = change_policy(self.connection, new)
        self._policy = after
        self.record_policy_change(before, after, reason=reason, actor=actor, now_ms=now_ms)
        return after

    def claim_many(self, n: int, *, owner: str | None, now_ms: int, lease_ms: int | None) -> list[Lease]:
        """Claim up to n heads, one per flow, lowest rotation position first."""
        policy = self.policy()
        return claim.claim_many(self, n, owner=owner, now_ms=now_ms,
                                lease_ms=to_ms(policy.lease_seconds) if lease_ms is None else lease_ms,
                                max_attempts=policy.max_attempts)

    def check_fence(self, event_id: str, generation: int, now_ms: int) -> None:
        """Raise StaleLease or LeaseExpired unless this lease may settle now."""
        settle.check_fence(self, event_id, generation, now_ms)

    def settle_many(self, items: Sequence[SettleItem], *, now_ms: int) -> list[Settled | LeaseLost]:
        """Settle each lease on its own; a lost lease is reported in its slot."""
        policy = self.policy()
        return settle.settle_many(self, items, now_ms=now_ms, max_attempts=policy.max_attempts,
                                  backoff=policy.backoff)

    def extend(self, event_id: str, generation: int, *, lease_ms: int | None, now_ms: int) -> Lease:
        """Move a live lease's end to now + lease_ms (fenced like settle)."""
        return settle.extend(self, event_id, generation, now_ms=now_ms,
                             lease_ms=to_ms(self.policy().lease_seconds) if lease_ms is None else lease_ms)

    def redrive_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Give each quarantined head a new round; its new generation or refusal in its slot."""
        return settle.redrive_many(self, items, reason=reason, actor=actor, now_ms=now_ms)

    def discard_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Discard each ready or quarantined event; its new generation or refusal in its slot."""
        return operators.discard_many(self, items, reason=reason, actor=actor, now_ms=now_ms)

    def set_paused(self, flow: str, paused: bool, *, reason: str | None, actor: str | None, now_ms: int) -> bool:
        """Pause or resume a named flow, audited; False when it already was so."""
        return operators.set_paused(self, flow, paused, reason=reason, actor=actor, now_ms=now_ms)

    def set_weight(self, name: str, weight: int) -> None:
        """Set a flow's weight, creating the flow if it has never been seen."""
        # Only the weight changes; a new flow's seqs start at 1.
        self.connection.execute(
            "INSERT INTO flow (name, weight) VALUES (:name, :weight) "
            "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight",
            {"name": name, "weight": weight},
        )

    def set_tenant(self, name: str, *, weight: int | None, max_inflight: int | None, rate: int | None,
                   burst: int | None, reason: str | None, actor: str | None, now_ms: int) -> TenantInfo:
        """Store a tenant's settings (None: as stored) with one 'set_tenant' audit row."""
        return tenant_rows.set_tenant(self, name, weight=weight, max_inflight=max_inflight, rate=rate, burst=burst,
                                      reason=reason, actor=actor, now_ms=now_ms)

    def store_results(self, items: Sequence[tuple[str, str]], *, now_ms: int) -> None:
        """Store each (event_id, canonical JSON) as the result of the event this transaction acked."""
        results.store_results(self, items, now_ms=now_ms)

    def reset_clock(self, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
        """Move the stored clock back to to_ms, with every lease end and ready time beyond it."""
        return maintenance.reset_clock(self, to_ms, reason=reason, actor=actor)

    def purge_acked(self, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
        """Tombstone the old acked events among the next `chunk` rows after `after_id`."""
        return maintenance.purge_acked(self, after_id, chunk=chunk, acked_before_ms=acked_before_ms)

    def drop_tombstones(self, acked_before_ms: int, *, limit: int) -> int:
        """Forget up to `limit` tombstones of events acked before acked_before_ms."""
        return maintenance.drop_tombstones(self, acked_before_ms, limit=limit)

    def schedules(self) -> ScheduleTxn:
        """The schedule statements, in this transaction."""
        return ScheduleTxn(self)
