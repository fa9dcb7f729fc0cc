"""The PostgreSQL queue store: PgStore (fairq.backend.Store) and PgTxn
(fairq.backend.WriteTxn), one method per verb.

PgStore opens one connection, creates or upgrades the schema (unless
readonly), refuses an open whose clock is not the queue's, and hands out
transactions and read snapshots. PgTxn runs each
verb's SQL (enqueue, claim, settle, maintenance) inside one transaction that
txn.TxnCore keeps. The invariants are the SQLite store's (fairq.store.queue):
a flow's head is its lowest unacked event and has exactly one head row;
a head row's dispatch_ms is its next_at while ready, its lease end while
inflight, NULL while quarantined; runnable heads are due; the counters'
shards sum to the number of events in each state. Decisions come from
fairq.rules and fairq.policy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..backend import NewEvent, SettleItem
from ..errors import LeaseLost, RedriveRefused, UsageError
from ..policy import Backoff, Policy, policy_json
from ..types import ClockReset, Enqueued, Lease, Settled
from . import claim, enqueue, maintenance, settle
from .connection import PgDatabase
from .policy_store import change_policy, store_policy
from .reads import PgReads
from .schedules import PgSchedules
from .schema import ensure_schema, require_current
from .txn import TxnCore

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
        return PgTxn(self.db, name, conn, server_clock=self.server_clock)

    def read(self, fn: Callable[[PgReads], T]) -> T:
        """fn(reads) on one read-only snapshot."""
        return self.db.read(lambda conn: fn(PgReads(conn, server_clock=self.server_clock)))

    def earliest_ready_ms(self) -> int | None:
        """When the next waiting head becomes claimable (ms of the queue's
        clock), None when no head waits: how long a worker may sleep."""
        return self.read(lambda reads: reads.earliest_ready_ms())


def clock_name(server_clock: bool) -> str:
    """How the queue's clock is stored and named: "server" or "model"."""
    return "server" if server_clock else "model"


class PgTxn(TxnCore):
    """Every verb, bound to one open transaction (a context manager)."""

    def __enter__(self) -> PgTxn:
        super().__enter__()
        return self

    def enqueue_many(self, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
        return enqueue.enqueue_many(self, items, now_ms)

    def set_policy(self, new: Policy, *, reason: str | None, actor: str | None, now_ms: int) -> Policy:
        """Store `new` as the next policy version with one audit row; unchanged: no write."""
        before, after = change_policy(self.connection, new)
        self._policy = after
        if after.version != before.version:
            self.record("", "policy_set", reason, actor, None, now_ms,
                        {"from": policy_json(before), "to": policy_json(after)})
        return after

    def claim_many(self, n: int, *, owner: str | None, now_ms: int, lease_ms: int,
                   max_attempts: int) -> list[Lease]:
        return claim.claim_many(self, n, owner=owner, now_ms=now_ms, lease_ms=lease_ms, max_attempts=max_attempts)

    def check_fence(self, event_id: str, generation: int, now_ms: int) -> None:
        settle.check_fence(self, event_id, generation, now_ms)

    def settle_many(self, items: Sequence[SettleItem], *, now_ms: int, max_attempts: int,
                    backoff: Backoff) -> list[Settled | LeaseLost]:
        return settle.settle_many(self, items, now_ms=now_ms, max_attempts=max_attempts, backoff=backoff)

    def extend(self, event_id: str, generation: int, *, lease_ms: int, now_ms: int) -> Lease:
        return settle.extend(self, event_id, generation, lease_ms=lease_ms, now_ms=now_ms)

    def redrive_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Give each quarantined head a new round; its new generation or refusal in its slot."""
        return settle.redrive_many(self, items, reason=reason, actor=actor, now_ms=now_ms)

    def set_weight(self, name: str, weight: int) -> None:
        """Set a flow's weight, creating the flow if it has never been seen."""
        # Only the weight changes; a new flow's seqs start at 1.
        self.execute("INSERT INTO flow (name, weight) VALUES (%(name)s, %(weight)s) "
                     "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight", {"name": name, "weight": weight})

    def reset_clock(self, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
        return maintenance.reset_clock(self, to_ms, reason=reason, actor=actor)

    def purge_acked(self, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
        return maintenance.purge_acked(self, after_id, chunk=chunk, acked_before_ms=acked_before_ms)

    def drop_tombstones(self, acked_before_ms: int, *, limit: int) -> int:
        return maintenance.drop_tombstones(self, acked_before_ms, limit=limit)

    def schedules(self) -> PgSchedules:
        return PgSchedules(self.connection)
