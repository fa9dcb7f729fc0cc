"""The Queue facade: validate input, pick the time, run one transaction per verb.

Every public method is its own committed transaction: you never call commit().
Input is validated before the transaction opens, so a refusal writes nothing.
The clock is read once per call (again only after a settle effect, which may have
taken long). No SQL lives here, and no database is named: it speaks
fairq.stores.backend's protocols.

Queue opens and closes the store and holds the hot verbs: enqueue (and
enqueue_many, ingest), claim, settle (and its shortcuts, settle_many), extend.
The other verbs are its base classes, one module per concept, all on the
shared QueueBase (fairq.api.base: the store, the clock, the time a call asks
for): reads, operators (redrive, weights), maintenance (purge, clock reset),
configuration (the stored policy), scheduling (schedules, tick), waits.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, overload

from .. import _crash, ingest
from .. import _validate as v
from .._ids import new_event_id
from ..errors import InvalidInput, LeaseLost
from ..kernel.policy import DEFAULT_MAX_CLOCK_SKEW, Backoff, Policy
from ..leases import lease_key, settle_parts
from ..limits import DEFAULT_MAX_BODY_BYTES, INGEST_MAX_BYTES, INGEST_MAX_LINES, MAX_BODY_CEILING, MAX_COUNT
from ..stores import open_store, uses_server_clock
from ..stores.backend import AppConnection, NewEvent, SettleItem
from ..types import Enqueued, Lease, Outcome, Settled, State
from . import policy_args as _policy_args
from .configuration import QueueConfig
from .maintenance import QueueMaintenance
from .operators import QueueOperators
from .reads import QueueReads
from .results import QueueResults, result_text
from .requests import batch_item, call_lease_ms, new_event, settle_item, store_path, wall_clock
from .scheduling import QueueScheduling
from .tenants import QueueTenants
from .waits import QueueWaits

__all__ = ["Queue"]

log = logging.getLogger("fairq")

Effect = Callable[[AppConnection], Any]


class Queue(QueueReads, QueueOperators, QueueTenants, QueueMaintenance, QueueConfig, QueueScheduling,
            QueueWaits, QueueResults):
    """A durable, fair, fenced work queue in one SQLite file (or a PostgreSQL database).

    The retry policy is stored in the file, so every process decides an
    event's fate the same way: lease_seconds, how long a claim lasts unless
    the call or an extend says otherwise (a holder that dies keeps its event
    for this long); max_attempts, claims per round before the event is
    quarantined (a worker that died counts); backoff, the retry delays. The
    open that creates the file stores the values given (defaults: 30 s, 5,
    Backoff()). Later opens leave them None to use the stored policy; a
    value given that differs from the stored one is refused (PolicyMismatch)
    and nothing is written. set_policy changes it for every process, audited.
    synchronous: "full" (default) survives power loss; "normal" is faster but
    may lose the last commits on power loss (never on a process crash).
    busy_timeout: seconds to wait for another writer before raising Busy
    (at most 2,147,483.647: SQLite counts it in int milliseconds).
    max_body_bytes: the largest canonical JSON body accepted. clock: the
    wall clock used when a call gets no explicit `now` (default: the system
    clock; give a model clock for tests and simulations). On a postgresql://
    URL the default ("server") runs calls at the database server's clock, so
    hosts with skewed clocks agree on lease ends, and an explicit `now` is
    refused (InvalidInput); "model" or a callable keeps a stored clock as on
    SQLite. On SQLite "server" and "model" mean the system clock. max_clock_skew:
    how many seconds ahead of that clock an explicit `now` may be; a later
    one is refused (InvalidInput), since the stored clock never goes back by
    itself. "auto" (default): 300 s on the system clock, no bound on a model
    clock; None: no bound. The clock must return finite seconds >= 0 (else
    InvalidInput naming "clock"). readonly: open an existing, current queue
    file only to read it; nothing ever writes the file, a missing, empty,
    foreign or older file is refused (SchemaError), and writing verbs raise
    ReadOnly.

    A Queue may be shared by threads: calls take turns on one connection.
    Many processes may open the same file.
    """

    def __init__(
        self,
        path: Any,
        *,
        lease_seconds: float | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        synchronous: str = "full",
        busy_timeout: float = 10.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Callable[[], float] | Literal["server", "model"] | None = None,
        max_clock_skew: float | None | Literal["auto"] = "auto",
        readonly: bool = False,
    ) -> None:
        path = store_path(path)
        given = _policy_args.given(max_attempts=max_attempts, backoff=backoff, lease_seconds=lease_seconds)
        self.max_body_bytes = v.count(max_body_bytes, "max_body_bytes", low=2, high=MAX_BODY_CEILING)
        v.seconds(busy_timeout, "busy_timeout")
        self._clock, self._clock_arg = wall_clock(clock), clock
        self._server_clock = uses_server_clock(path, clock)
        if not isinstance(readonly, bool):
            raise InvalidInput("readonly", f"must be a bool, not {type(readonly).__name__}")
        if max_clock_skew == "auto":
            max_clock_skew = DEFAULT_MAX_CLOCK_SKEW if self._clock is time.time else None
        self.max_clock_skew = v.optional_seconds(max_clock_skew, "max_clock_skew")
        self._open_args: dict[str, Any] = {"synchronous": synchronous, "busy_timeout": busy_timeout}
        self._store = open_store(path, readonly=readonly, clock=clock, **self._open_args,
                                        policy=_policy_args.changed(Policy(), given))
        self.path = path
        try:
            _policy_args.check(self.policy(), given)
        except BaseException:
            self._store.close()
            raise

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. The file stays consistent whatever state it is in."""
        self._close_waits()
        self._close_results()
        self._store.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that open this file again with the same behaviour:
        ``fairq.Queue(q.path, **q.settings())`` (e.g. in a worker process). The
        retry policy is not among them: it is stored in the file."""
        return {"max_body_bytes": self.max_body_bytes, "clock": self._clock_arg,
                "max_clock_skew": self.max_clock_skew, **self._open_args}

    @property
    def parallel_calls(self) -> int:
        """How many calls threads sharing this Queue can have running at once:
        on PostgreSQL its pool of connections (fairq_pool), on SQLite 1."""
        return self._store.parallel_calls

    # -- enqueue -----------------------------------------------------------------

    def enqueue(
        self, event_id: str | None, body: Any, *, flow: str | None = None, tenant: str | None = None,
        delay: float = 0.0, now: float | None = None, conn: AppConnection | None = None,
        kind: str | None = None, max_attempts: int | None = None, timeout: float | None = None,
        backoff: Backoff | Mapping[str, Any] | None = None,
    ) -> Enqueued:
        """Add an event at the end of its flow (flow=None: a flow of its own).

        tenant: the tenant the flow belongs to (fairq.Queue.set_tenant): claims
        rotate over tenants first, then over each tenant's flows. A flow's
        tenant is fixed by its first event; another tenant (or none, for a
        flow that has one) raises Conflict. None: the flow is its own tenant.

        kind: the name of the task that handles the event (Lease.kind,
        Job.kind; events(kind=...) lists them). max_attempts, timeout
        (seconds its handler may run: a worker's timeout for that job) and
        backoff (a fairq.Backoff, or a dict of its fields): the event's own
        policy, stored with it, so every process judges it by them; None:
        the queue's stored policy (and the worker's own timeout).

        Enqueuing an id again with the same flow, body, tenant and kind
        returns created=False (the stored event keeps its own policy); with
        a different flow, body, tenant or kind it raises Conflict.
        event_id=None: fairq makes a new unique, time-ordered id (a UUIDv7
        string, returned in Enqueued.event_id); such an enqueue is not
        idempotent -- calling it again adds another event.
        conn: the application's own connection to this file, inside a
        transaction it has begun; the event is written in that transaction
        and commits (or rolls back) with it -- fairq never commits it.
        """
        item = new_event(new_event_id() if event_id is None else event_id, body, flow, delay,
                         max_body_bytes=self.max_body_bytes, tenant=tenant, kind=kind, max_attempts=max_attempts,
                         timeout=timeout, backoff=backoff)
        requested = self._requested(now)
        with self._store.transaction("enqueue", conn) as tx:
            return tx.enqueue_many([item], tx.now(*requested))[0]

    def enqueue_many(
        self, items: Iterable[Any], *, now: float | None = None, conn: AppConnection | None = None,
    ) -> list[Enqueued]:
        """Add many events in one transaction: all of them or none.

        items: (event_id, body), (event_id, body, flow) or (event_id, body,
        flow, tenant) tuples, or dicts with keys event_id, body and
        optionally flow, tenant, delay, kind, max_attempts, timeout and
        backoff (as for enqueue). An id repeated with
        identical content collapses to one event; any conflict refuses all.
        conn: as for enqueue, the application's open transaction to join.
        """
        batch = v.each(items, self._batch_item)
        requested = self._requested(now)
        if not batch:
            return []
        with self._store.transaction("enqueue", conn) as tx:
            return tx.enqueue_many(batch, tx.now(*requested))

    @overload
    def ingest(
        self, source: ingest.Source, *, max_bytes: int = ..., max_lines: int = ...,
        max_line_bytes: int | None = ..., max_body_bytes: int | None = ...,
        id_pattern: str | re.Pattern[str] | None = ..., now: float | None = ..., summary: Literal[False] = ...,
    ) -> list[Enqueued]: ...

    @overload
    def ingest(
        self, source: ingest.Source, *, max_bytes: int = ..., max_lines: int = ...,
        max_line_bytes: int | None = ..., max_body_bytes: int | None = ...,
        id_pattern: str | re.Pattern[str] | None = ..., now: float | None = ..., summary: Literal[True],
    ) -> ingest.Ingested: ...

    def ingest(
        self, source: ingest.Source, *, max_bytes: int = INGEST_MAX_BYTES,
        max_lines: int = INGEST_MAX_LINES, max_line_bytes: int | None = None,
        max_body_bytes: int | None = None, id_pattern: str | re.Pattern[str] | None = None,
        now: float | None = None, summary: bool = False,
    ) -> list[Enqueued] | ingest.Ingested:
        """Enqueue every event of a JSONL file in one transaction: all of them or none.

        source: a path, bytes, or a file opened in binary mode. Each non-blank
        line is an object with event_id and body, optionally flow, tenant and delay
        (fairq.ingest has the exact rules). The whole file is checked first,
        a line at a time, before the write lock is taken;
        a refusal is an InvalidInput or Conflict whose `line` is the line at
        fault, and nothing is written. Returns one Enqueued per non-blank
        line, in file order (created=False for repeats, in the file or of
        stored events); with summary=True only the counts (ingest.Ingested),
        so memory stays bounded by one chunk of lines whatever the file's
        size. Limits: max_bytes for the file, max_lines non-blank
        lines, max_line_bytes per line (default: the body limit + 4096),
        max_body_bytes per canonical body (default and ceiling: the queue's),
        id_pattern a regular expression every event_id must match.
        """
        limits = ingest.Limits.make(
            max_bytes=max_bytes, max_lines=max_lines, max_line_bytes=max_line_bytes,
            max_body_bytes=self.max_body_bytes if max_body_bytes is None else max_body_bytes,
            id_pattern=id_pattern, body_ceiling=self.max_body_bytes,
        )
        requested = self._requested(now)
        results: list[Enqueued] | None = None if summary else []
        checked = ingest.check(source, limits, self._batch_item)
        try:
            if not checked.lines:
                return ingest.Ingested(0, 0) if summary else []
            with self._store.transaction("ingest") as tx:
                done = ingest.store(tx, checked, tx.now(*requested), results)
        finally:
            checked.close()
        return done if results is None else results

    def _batch_item(self, item: Any) -> NewEvent:
        return batch_item(item, max_body_bytes=self.max_body_bytes)

    # -- claim -------------------------------------------------------------------

    def claim(
        self, *, owner: str | None = None, now: float | None = None,
        lease_seconds: float | None = None,
    ) -> Lease | None:
        """Lease the next head in fair order, or None when nothing is claimable."""
        leases = self.claim_many(1, owner=owner, now=now, lease_seconds=lease_seconds)
        return leases[0] if leases else None

    def claim_many(
        self, n: int, *, owner: str | None = None, now: float | None = None,
        lease_seconds: float | None = None,
    ) -> list[Lease]:
        """Lease up to n heads in one transaction: at most one per flow, in fair order."""
        n = v.count(n, "n", low=1, high=MAX_COUNT)  # a claim is bounded by the heads due
        if owner is not None:
            owner = v.identifier(owner, "owner")
        lease_ms = None if lease_seconds is None else call_lease_ms(lease_seconds)
        requested = self._requested(now)
        with self._store.transaction("claim") as tx:
            # The policy as stored now (any process may have changed it) judges the claim.
            return tx.claim_many(n, owner=owner, now_ms=tx.now(*requested), lease_ms=lease_ms)

    # -- settle --------------------------------------------------------------------

    def settle(
        self, lease: Lease, outcome: Outcome | str, *, reason: str | None = None,
        delay: float | None = None, effect: Effect | None = None, now: float | None = None,
        result: Any = None,
    ) -> Settled:
        """Record what became of a leased event: ack, retry, fail or release.

        Fenced: raises StaleLease if the event moved to another generation or
        is no longer inflight, LeaseExpired if now >= lease_until; nothing is
        written then. effect(conn), if given, runs in the same transaction
        after the fence check and before the state write; if it raises,
        everything rolls back and the error propagates. The lease is checked
        again after the effect, which may have taken long.
        result: an ack's result (any JSON value of at most max_body_bytes of
        canonical JSON, else InvalidInput naming "result"), stored in the
        ack's transaction for Queue.result and Queue.wait; None: no result.
        """
        item = settle_item(lease, outcome, reason, delay)
        text = result_text(result, item.outcome, self.max_body_bytes)
        if effect is not None and not callable(effect):
            raise InvalidInput("effect", "must be callable")
        requested = self._requested(now)
        with self._store.transaction("settle" if text is None else "settle_result") as tx:
            now_ms = tx.now(*requested)
            if effect is not None:
                tx.check_fence(item.event_id, item.generation, now_ms)
                tx.run_callback(effect, "the settle effect")
                _crash.point("settle", "after_effect")
                if now is None:
                    now_ms = tx.now(*self._requested(None))
            settled = tx.settle_many([item], now_ms=now_ms)[0]
            if isinstance(settled, LeaseLost):
                raise settled
            if text is not None:
                tx.store_results([(item.event_id, text)], now_ms=now_ms)
        _log_settled(settled)
        return settled

    def ack(self, lease: Lease, *, result: Any = None, **kw: Any) -> Settled:
        """settle(lease, "ack", ...). result: a JSON value stored with the ack
        (Queue.result, Queue.wait); None: none."""
        return self.settle(lease, Outcome.ACK, result=result, **kw)

    def retry(self, lease: Lease, reason: str | None = None, **kw: Any) -> Settled:
        """settle(lease, "retry", reason=reason, ...): again after a backoff (or `delay`)."""
        return self.settle(lease, Outcome.RETRY, reason=reason, **kw)

    def fail(self, lease: Lease, reason: str, **kw: Any) -> Settled:
        """settle(lease, "fail", reason=reason, ...): quarantine the event now."""
        return self.settle(lease, Outcome.FAIL, reason=reason, **kw)

    def release(self, lease: Lease, **kw: Any) -> Settled:
        """settle(lease, "release", ...): give the lease back unused, e.g. when
        a worker stops before starting the job. The event is ready at once and
        this claim does not count against the retry budget."""
        return self.settle(lease, Outcome.RELEASE, **kw)

    def settle_many(self, items: Iterable[Any], *, now: float | None = None) -> list[Settled | LeaseLost]:
        """Settle many leases in one transaction, each judged on its own.

        items: (lease, outcome), (lease, outcome, reason) or (lease, outcome,
        reason, delay), or (lease, "ack", None, None, result) to store an
        ack's result with it (as ack(result=...)). A lost lease is returned in
        its slot as the StaleLease / LeaseExpired it would have raised (no
        result is stored for it); the others are settled.
        """
        checked = v.each(items, self._settle_part)
        batch = [item for item, _ in checked]
        texts = [(item.event_id, text) for item, text in checked if text is not None]
        requested = self._requested(now)
        if not batch:
            return []
        with self._store.transaction("settle_result" if texts else "settle") as tx:
            now_ms = tx.now(*requested)
            results = tx.settle_many(batch, now_ms=now_ms)
            if texts:
                acked = {r.event_id for r in results if isinstance(r, Settled) and r.state is State.ACKED}
                tx.store_results([(event_id, text) for event_id, text in texts if event_id in acked], now_ms=now_ms)
        for result in results:
            _log_settled(result)
        return results

    def _settle_part(self, item: Any) -> tuple[SettleItem, str | None]:
        """One settle_many item checked: its request, and its result's JSON (None: none)."""
        lease, outcome, reason, delay, result = settle_parts(item)
        settle = settle_item(lease, outcome, reason, delay)
        return settle, result_text(result, settle.outcome, self.max_body_bytes)

    def extend(self, lease: Lease, seconds: float | None = None, *, now: float | None = None) -> Lease:
        """Heartbeat: the lease now ends at now + seconds (default: the stored
        policy's lease_seconds). Fenced."""
        event_id, generation = lease_key(lease, "lease")
        lease_ms = call_lease_ms(seconds, "seconds")
        requested = self._requested(now)
        with self._store.transaction("extend") as tx:
            return tx.extend(event_id, generation, lease_ms=lease_ms, now_ms=tx.now(*requested))


def _log_settled(result: Settled | LeaseLost) -> None:
    # DEBUG: the caller knows why (a Worker logs its quarantines at ERROR with the reason).
    if isinstance(result, Settled) and result.state is State.QUARANTINED:
        log.debug("settle.quarantined event_id=%s attempts=%d", result.event_id, result.attempts)
