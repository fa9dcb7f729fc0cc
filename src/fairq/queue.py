"""The Queue facade: validate input, pick the time, run one transaction per verb.

Every public method is its own committed transaction: you never call commit().
Input is validated before the transaction opens, so a refusal writes nothing.
The clock is read once per call (again only after a settle effect, which may
have taken long). No SQL lives here: fairq.store.queue has all of it.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from . import _crash, _policy_args, ingest
from ._ids import new_event_id
from . import _validate as v
from .errors import Conflict, InvalidInput, LeaseLost
from .policy import DEFAULT_MAX_CLOCK_SKEW, MAX_WEIGHT, Backoff, Policy, to_ms
from .schedules import Schedules, expand_due
from .store.clock import ClockTxn
from .store.policy_store import PolicyTxn, read_policy, store_policy
from .store.retention import RetentionTxn
from .store.queue import NewEvent, QueueStore, SettleItem
from .types import AuditEntry, Blocked, ClockReset, Enqueued, EventInfo, Lease, Outcome, Purged, Settled, State, Stats

__all__ = ["Queue"]

log = logging.getLogger("fairq")

#: The most items one HTTP call, worker step or purge chunk takes. In-process
#: batches (enqueue_many, claim_many, settle_many) have no cap.
MAX_BATCH = 10_000
#: claim_many's n can be anything up to this (a claim is bounded by the heads due).
_MAX_CLAIM = 2**62
#: Seconds a purged event's id is remembered after its ack (see Queue.purge).
DEDUP_WINDOW = 30 * 86_400.0
_ITEM_KEYS = frozenset({"event_id", "body", "flow", "delay"})

Effect = Callable[[sqlite3.Connection], Any]


class Queue:
    """A durable, fair, fenced work queue in one SQLite file.

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
    busy_timeout: seconds to wait for another writer before raising Busy.
    max_body_bytes: the largest canonical JSON body accepted. clock: the
    wall clock used when a call gets no explicit `now` (default: the system
    clock; give a model clock for tests and simulations). max_clock_skew:
    how many seconds ahead of that clock an explicit `now` may be; a later
    one is refused (InvalidInput), since the stored clock never goes back by
    itself. "auto" (default): 300 s on the system clock, no bound on a model
    clock; None: no bound.

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
        max_body_bytes: int = v.DEFAULT_MAX_BODY_BYTES,
        clock: Callable[[], float] = time.time,
        max_clock_skew: float | None | Literal["auto"] = "auto",
    ) -> None:
        given = _policy_args.given(max_attempts=max_attempts, backoff=backoff, lease_seconds=lease_seconds)
        self.max_body_bytes = v.count(max_body_bytes, "max_body_bytes", low=2, high=1 << 30)
        v.seconds(busy_timeout, "busy_timeout")
        self._clock = clock
        if max_clock_skew == "auto":
            max_clock_skew = DEFAULT_MAX_CLOCK_SKEW if clock is time.time else None
        self.max_clock_skew = v.optional_seconds(max_clock_skew, "max_clock_skew")
        self._open_args = {"synchronous": synchronous, "busy_timeout": busy_timeout}
        self._store = QueueStore(path, synchronous=synchronous, busy_timeout=busy_timeout,
                                 seed=lambda conn: store_policy(conn, _policy_args.initial(given)))
        self.path = path
        try:
            _policy_args.check(self.policy(), given)
        except BaseException:
            self._store.close()
            raise

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. The file stays consistent whatever state it is in."""
        self._store.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that open this file again with the same behaviour:
        ``fairq.Queue(q.path, **q.settings())`` (e.g. in a worker process). The
        retry policy is not among them: it is stored in the file."""
        return {"max_body_bytes": self.max_body_bytes, "clock": self._clock,
                "max_clock_skew": self.max_clock_skew, **self._open_args}

    # -- the stored retry policy ---------------------------------------------------

    def policy(self) -> Policy:
        """The retry policy stored in the file, read now (any process may have changed it)."""
        return self._store.db.read(read_policy)

    @property
    def max_attempts(self) -> int:
        """The stored policy's claims per round before quarantine, read now."""
        return self.policy().max_attempts

    @property
    def backoff(self) -> Backoff:
        """The stored policy's retry delays, read now."""
        return self.policy().backoff

    @property
    def lease_seconds(self) -> float:
        """The stored policy's lease for a claim or extend that names none, read now."""
        return self.policy().lease_seconds

    def set_policy(
        self, *, max_attempts: int | None = None, backoff: Backoff | None = None,
        lease_seconds: float | None = None, reason: str, actor: str | None = None,
    ) -> Policy:
        """Change the stored retry policy for every process that has the file
        open, from its next call; audited (action "policy_set", the policy
        before and after in its detail). Fields left None keep their value.
        Returns the policy now stored; when nothing changes, no row is written.
        Does not move the stored clock.
        A new max_attempts judges events from their next claim or settle:
        one already past it is quarantined then, not at once.
        """
        fields = _policy_args.given(max_attempts=max_attempts, backoff=backoff, lease_seconds=lease_seconds)
        if not fields:
            raise InvalidInput("policy", "give max_attempts, backoff or lease_seconds to change")
        why = v.reason(reason, "reason", required=True)
        actor = v.optional_identifier(actor, "actor")
        reading_ms = self._requested(None)[0]
        with self._store.transaction("set_policy") as tx:
            # Configuration does not move the stored clock; the audit row gets
            # the time a call would run at now.
            now_ms = max(reading_ms, tx.stored_now())
            stored = PolicyTxn(tx)
            before = stored.current()
            after = stored.change(_policy_args.changed(before, fields), reason=why, actor=actor, now_ms=now_ms)
        if after.version != before.version:
            log.warning("retry policy changed by %s to version %d: %s (%s)", actor, after.version,
                        {name: getattr(after, name) for name in fields}, why)
        return after

    def _requested(self, now: float | None, field: str = "now") -> tuple[int, bool]:
        """(milliseconds, explicit?) for a call's `now` argument; an explicit
        time more than max_clock_skew ahead of the clock is refused."""
        if now is None:
            return to_ms(self._clock()), False
        at = v.seconds(now, field)
        if self.max_clock_skew is not None:
            reading = self._clock()
            if at > reading + self.max_clock_skew:
                raise InvalidInput(field, f"{at!r} is {at - reading:.3f} s ahead of the clock ({reading!r}); "
                                          f"at most max_clock_skew={self.max_clock_skew:g} s is accepted")
        return to_ms(at), True

    # -- enqueue -----------------------------------------------------------------

    def enqueue(
        self, event_id: str | None, body: Any, *, flow: str | None = None, delay: float = 0.0,
        now: float | None = None, conn: sqlite3.Connection | None = None,
    ) -> Enqueued:
        """Add an event at the end of its flow (flow=None: a flow of its own).

        Enqueuing an id again with the same flow and body returns
        created=False; with a different flow or body it raises Conflict.
        event_id=None: fairq makes a new unique, time-ordered id (a UUIDv7
        string, returned in Enqueued.event_id); such an enqueue is not
        idempotent -- calling it again adds another event.
        conn: the application's own connection to this file, inside a
        transaction it has begun; the event is written in that transaction
        and commits (or rolls back) with it -- fairq never commits it.
        """
        item = self._new_event(new_event_id() if event_id is None else event_id, body, flow, delay)
        requested = self._requested(now)
        with self._store.transaction("enqueue", conn) as tx:
            return tx.enqueue_many([item], tx.now(*requested))[0]

    def enqueue_many(
        self, items: Iterable[Any], *, now: float | None = None, conn: sqlite3.Connection | None = None,
    ) -> list[Enqueued]:
        """Add many events in one transaction: all of them or none.

        items: (event_id, body) or (event_id, body, flow) tuples, or dicts with
        keys event_id, body and optionally flow and delay. An id repeated with
        identical content collapses to one event; any conflict refuses all.
        conn: as for enqueue, the application's open transaction to join.
        """
        batch = v.each(items, self._batch_item)
        requested = self._requested(now)
        if not batch:
            return []
        with self._store.transaction("enqueue", conn) as tx:
            return tx.enqueue_many(batch, tx.now(*requested))

    def ingest(
        self, source: ingest.Source, *, max_bytes: int = ingest.DEFAULT_MAX_BYTES,
        max_lines: int = ingest.DEFAULT_MAX_LINES, max_line_bytes: int | None = None,
        max_body_bytes: int | None = None, id_pattern: str | re.Pattern[str] | None = None,
        now: float | None = None,
    ) -> list[Enqueued]:
        """Enqueue every event of a JSONL file in one transaction: all of them or none.

        source: a path, bytes, or a file opened in binary mode. Each non-blank
        line is an object with event_id and body, optionally flow and delay
        (fairq.ingest has the exact rules). The whole file is checked first;
        a refusal is an InvalidInput or Conflict whose `line` is the line at
        fault, and nothing is written. Returns one Enqueued per non-blank
        line, in file order (created=False for repeats, in the file or of
        stored events). Limits: max_bytes for the file, max_lines non-blank
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
        events = ingest.read(source, limits, self._batch_item)
        if not events:
            return []
        with self._store.transaction("ingest") as tx:
            try:
                return tx.enqueue_many([event for _, event in events], tx.now(*requested))
            except Conflict as exc:
                raise Conflict(exc.event_id, exc.field, str(exc),
                               line=ingest.line_of(events, exc.event_id)) from exc

    def _batch_item(self, item: Any) -> NewEvent:
        if isinstance(item, tuple) and 2 <= len(item) <= 3:
            return self._new_event(item[0], item[1], item[2] if len(item) == 3 else None, 0.0)
        if isinstance(item, Mapping):
            unknown = set(item) - _ITEM_KEYS
            if unknown:
                raise InvalidInput(sorted(unknown)[0], "is not a known key (event_id, body, flow, delay)")
            if "event_id" not in item or "body" not in item:
                raise InvalidInput("event_id" if "event_id" not in item else "body", "is required")
            return self._new_event(item["event_id"], item["body"], item.get("flow"), item.get("delay", 0.0))
        raise InvalidInput("", "must be (event_id, body), (event_id, body, flow) or a dict")

    def _new_event(self, event_id: Any, body: Any, flow: Any, delay: Any) -> NewEvent:
        return NewEvent(
            v.identifier(event_id, "event_id"),
            None if flow is None else v.identifier(flow, "flow"),
            v.body(body, "body", max_bytes=self.max_body_bytes),
            to_ms(v.seconds(delay, "delay")),
        )

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
        n = v.count(n, "n", low=1, high=_MAX_CLAIM)
        owner = v.optional_identifier(owner, "owner")
        lease_ms = _lease_ms(lease_seconds)
        requested = self._requested(now)
        with self._store.transaction("claim") as tx:
            now_ms = tx.now(*requested)
            policy = PolicyTxn(tx).current()  # as stored now: any process may have changed it
            return tx.claim_many(n, owner=owner, now_ms=now_ms,
                                 lease_ms=to_ms(policy.lease_seconds) if lease_ms is None else lease_ms,
                                 max_attempts=policy.max_attempts)

    # -- settle --------------------------------------------------------------------

    def settle(
        self, lease: Lease, outcome: Outcome | str, *, reason: str | None = None,
        delay: float | None = None, effect: Effect | None = None, now: float | None = None,
    ) -> Settled:
        """Record what became of a leased event: ack, retry, fail or release.

        Fenced: raises StaleLease if the event moved to another generation or
        is no longer inflight, LeaseExpired if now >= lease_until; nothing is
        written then. effect(conn), if given, runs in the same transaction
        after the fence check and before the state write; if it raises,
        everything rolls back and the error propagates. The lease is checked
        again after the effect, which may have taken long.
        """
        item = self._settle_item(lease, outcome, reason, delay)
        if effect is not None and not callable(effect):
            raise InvalidInput("effect", "must be callable")
        requested = self._requested(now)
        with self._store.transaction("settle") as tx:
            now_ms = tx.now(*requested)
            if effect is not None:
                tx.check_fence(item.event_id, item.generation, now_ms)
                tx.run_callback(effect, "the settle effect")
                _crash.point("settle", "after_effect")
                if now is None:
                    now_ms = tx.now(*self._requested(None))
            policy = PolicyTxn(tx).current()
            result = tx.settle_many([item], now_ms=now_ms, max_attempts=policy.max_attempts,
                                    backoff=policy.backoff)[0]
            if isinstance(result, LeaseLost):
                raise result
        _log_settled(result)
        return result

    def ack(self, lease: Lease, **kw: Any) -> Settled:
        """settle(lease, "ack", ...)."""
        return self.settle(lease, Outcome.ACK, **kw)

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
        reason, delay). A lost lease is returned in its slot as the
        StaleLease / LeaseExpired it would have raised; the others are settled.
        """
        batch = v.each(items, lambda item: self._settle_item(*settle_parts(item)))
        requested = self._requested(now)
        if not batch:
            return []
        with self._store.transaction("settle") as tx:
            now_ms = tx.now(*requested)
            policy = PolicyTxn(tx).current()
            results = tx.settle_many(batch, now_ms=now_ms, max_attempts=policy.max_attempts,
                                     backoff=policy.backoff)
        for result in results:
            _log_settled(result)
        return results

    def _settle_item(self, lease: Any, outcome: Any, reason: Any, delay: Any) -> SettleItem:
        event_id, generation = _lease_key(lease, "lease")
        outcome = v.outcome(outcome)
        if outcome is Outcome.ACK or outcome is Outcome.RELEASE:
            if reason is not None:
                raise InvalidInput("reason", f"{outcome.value} takes no reason")
            if delay is not None:
                raise InvalidInput("delay", f"{outcome.value} takes no delay")
            return SettleItem(event_id, generation, outcome, None, None)
        if outcome is Outcome.FAIL and delay is not None:
            raise InvalidInput("delay", "a fail takes no delay")
        return SettleItem(event_id, generation, outcome,
                          v.reason(reason, "reason", required=outcome is Outcome.FAIL),
                          v.optional_seconds(delay, "delay"))

    def extend(self, lease: Lease, seconds: float | None = None, *, now: float | None = None) -> Lease:
        """Heartbeat: the lease now ends at now + seconds (default: the stored
        policy's lease_seconds). Fenced."""
        event_id, generation = _lease_key(lease, "lease")
        lease_ms = _lease_ms(seconds, "seconds")
        requested = self._requested(now)
        with self._store.transaction("extend") as tx:
            now_ms = tx.now(*requested)
            if lease_ms is None:
                lease_ms = to_ms(PolicyTxn(tx).current().lease_seconds)
            return tx.extend(event_id, generation, lease_ms=lease_ms, now_ms=now_ms)

    # -- redrive -------------------------------------------------------------------

    def redrive(
        self, event_id: str, *, expected_generation: int, reason: str, actor: str | None = None,
        now: float | None = None,
    ) -> int:
        """Give a quarantined event a new round; returns its new generation.

        Refused (RedriveRefused) unless the event is quarantined at
        expected_generation. Resets attempts (not lifetime_attempts) and
        appends an audit row that keeps the quarantine reason it replaces.
        """
        event_id = v.identifier(event_id, "event_id")
        expected_generation = v.count(expected_generation, "expected_generation", low=0, high=2**62)
        reason = v.reason(reason, "reason", required=True)
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        with self._store.transaction("redrive") as tx:
            now_ms = tx.now(*requested)
            generation = tx.redrive(event_id, expected_generation=expected_generation, reason=reason,
                                    actor=actor, now_ms=now_ms)
        log.info("redrive %s -> generation %d by %s: %s", event_id, generation, actor, reason)
        return generation

    def reset_clock(self, *, reason: str, actor: str | None = None, to: float | None = None) -> ClockReset:
        """Move the stored clock back to the clock's reading now (or to `to`),
        after a call at a mistaken future time; audited (action "clock_reset").

        Every lease end and ready time (delay, backoff) beyond the new clock
        moves back by as much as the clock does, never before it, so nothing
        waits for the real clock to catch up. A holder whose lease now ends
        earlier is still fenced by its generation. Returns what moved; when
        the stored clock is not ahead, nothing changes and no row is written.
        """
        reason = v.reason(reason, "reason", required=True)
        actor = v.optional_identifier(actor, "actor")
        to_ms_ = self._requested(None)[0] if to is None else self._requested(to, "to")[0]
        with self._store.transaction("reset_clock") as tx:
            done = ClockTxn(tx).reset(to_ms_, reason=reason, actor=actor)
        if done.after < done.before:
            log.warning("clock reset from %s to %s by %s: %d leases and %d ready times moved back (%s)",
                        done.before, done.after, actor, done.leases, done.waits, reason)
        return done

    # -- configuration ---------------------------------------------------------------

    def set_weight(self, flow: str, weight: int) -> None:
        """Give a flow `weight` claims per rotation round (default 1, at most 1000).

        Allowed before the flow has any event. Does not read or move the clock.
        """
        flow = v.identifier(flow, "flow")
        weight = v.count(weight, "weight", low=1, high=MAX_WEIGHT)
        with self._store.transaction("set_weight") as tx:
            tx.set_weight(flow, weight)

    # -- schedules ---------------------------------------------------------------------

    @property
    def schedules(self) -> Schedules:
        """The periodic schedules kept in this file: add, get, list, remove, pause, resume."""
        return Schedules(self)

    def tick(self, *, now: float | None = None, ahead: float = 0.0) -> list[Enqueued]:
        """Turn every due slot of every unpaused schedule into an instance, idempotently.

        Each schedule resumes from its stored position; slots missed while
        nothing ticked are reconciled by its misfire policy, and each slot
        not turned into an instance is an audit row with action "misfire".
        ahead: also expand slots up to this many seconds in the future; their
        instances become claimable at their slot. Returns the instances.
        """
        ahead_ms = to_ms(v.seconds(ahead, "ahead"))
        requested = self._requested(now)
        with self._store.transaction("tick") as tx:
            return expand_due(tx, tx.now(*requested), ahead_ms)

    # -- reads -------------------------------------------------------------------------

    def get(self, event_id: str) -> EventInfo | None:
        """Everything stored about one event, or None."""
        event_id = v.identifier(event_id, "event_id")
        return self._store.read(lambda tx: tx.get(event_id))

    def events(self, *, state: State | str | None = None, flow: str | None = None,
               limit: int = 100) -> list[EventInfo]:
        """Events filtered by state and/or flow (flow order: by seq; else by enqueue order)."""
        if state is not None:
            try:
                state = State(state).value
            except ValueError:
                raise InvalidInput("state", f"must be one of {[s.value for s in State]}, got {state!r}") from None
        flow = v.optional_identifier(flow, "flow")
        limit = v.count(limit, "limit", low=1, high=1_000_000)
        return self._store.read(lambda tx: tx.events(state=state, flow=flow, limit=limit))

    def audit(self, event_id: str | None = None, *, limit: int | None = None) -> list[AuditEntry]:
        """Audit rows, oldest first: for one event, or for the whole queue."""
        event_id = v.optional_identifier(event_id, "event_id")
        if limit is not None:
            limit = v.count(limit, "limit", low=1, high=10_000_000)
        return self._store.read(lambda tx: tx.audit(event_id, limit=limit))

    def stats(self, *, now: float | None = None, top: int = 10) -> Stats:
        """Counts by state (zeros included), flows, oldest ready age, totals,
        claim lag median/p99 and the `top` named flows by backlog.

        A read: uses `now` (or the wall clock) for ages but never moves the
        stored clock.
        """
        now_ms = self._requested(now)[0]
        top = v.count(top, "top", low=0, high=10_000)
        return self._store.read(lambda tx: tx.stats(now_ms, top=top))

    def why_blocked(self, flow: str, *, now: float | None = None) -> Blocked:
        """Why a flow is not moving, in one answer: its head is quarantined
        (with the redrive command), backing off, delayed, leased or expired;
        or the flow is ready, empty or unknown. A read: never moves the clock.
        """
        flow = v.identifier(flow, "flow")
        now_ms = self._requested(now)[0]
        found = self._store.read(lambda tx: tx.flow_head(flow))
        at = now_ms / 1000
        if found is None:
            return Blocked(flow, "unknown", at)
        next_seq, head = found
        if head is None:
            return Blocked(flow, "empty", at)
        blocked = functools.partial(
            Blocked, flow, now=at, event_id=head.event_id, seq=head.seq, owner=head.owner,
            reason=head.reason, generation=head.generation, attempts=head.attempts,
            backlog=next_seq - head.seq)
        if head.state is State.QUARANTINED:
            return blocked("quarantined", redrive=_redrive_command(self.path, head))
        if head.state is State.INFLIGHT:
            assert head.lease_until is not None
            return blocked("leased" if head.lease_until > at else "expired", until=head.lease_until)
        assert head.next_at is not None
        if head.next_at <= at:
            return blocked("ready")
        return blocked("backing_off" if head.attempts else "delayed", until=head.next_at)

    # -- retention ---------------------------------------------------------------------

    def purge(
        self, *, acked_before: float, dedup_window: float | None = DEDUP_WINDOW,
        now: float | None = None, chunk: int = 1000,
    ) -> Purged:
        """Remove acked events settled before `acked_before`, keeping a tombstone of each.

        A tombstone (id, flow, seq, body hash) makes a re-enqueue of the id
        answer created=False or Conflict as before. Tombstones of events
        acked more than `dedup_window` seconds before `now` are dropped
        (None: kept forever); after that the id may name a new event.
        Ready, inflight and quarantined events are never touched.

        Maintenance, not a hot-path verb: it pages through the whole event
        table by row id, one transaction per `chunk` rows, so writers wait at
        most one chunk. Stopped halfway, it leaves a consistent queue; run it
        again to finish.
        """
        acked_before_ms = to_ms(v.seconds(acked_before, "acked_before"))
        window_ms = None if dedup_window is None else to_ms(v.seconds(dedup_window, "dedup_window"))
        chunk = v.count(chunk, "chunk", low=1, high=MAX_BATCH)
        requested = self._requested(now)
        events = dropped = 0
        cursor: int | None = 0
        while cursor is not None:
            with self._store.transaction("purge") as tx:
                # The first chunk checks an explicit time; later ones run at it or after.
                requested = (tx.now(*requested), False)
                n, cursor = RetentionTxn(tx).purge_acked(cursor, chunk=chunk, acked_before_ms=acked_before_ms)
            events += n
        while window_ms is not None:
            with self._store.transaction("purge") as tx:
                requested = (tx.now(*requested), False)
                n = RetentionTxn(tx).drop_tombstones(requested[0] - window_ms, limit=chunk)
            dropped += n
            if n < chunk:
                break
        if events or dropped:
            log.info("purge events=%d tombstones_dropped=%d", events, dropped)
        return Purged(events, dropped)


def _lease_ms(value: float | None, field: str = "lease_seconds") -> int | None:
    """A call's own lease in milliseconds; None: the stored policy's, read in the call's transaction."""
    return None if value is None else to_ms(v.seconds(value, field, positive=True))


def _redrive_command(path: Any, head: EventInfo) -> str:
    """The fairq command line that redrives a quarantined head."""
    return (f"fairq --db {shlex.quote(os.fspath(path))} redrive {shlex.quote(head.event_id)} "
            f"--expected-generation {head.generation} --reason '<why it is safe to run again>'")


def _lease_key(lease: Any, field: str) -> tuple[str, int]:
    """(event_id, generation): all that settle and extend need from a lease."""
    event_id = getattr(lease, "event_id", None)
    generation = getattr(lease, "generation", None)
    if event_id is None or generation is None:
        raise InvalidInput(field, f"must be a fairq.Lease, not {type(lease).__name__}")
    v.identifier(event_id, field + ".event_id")
    v.count(generation, field + ".generation", low=1, high=2**62)
    return event_id, generation


def settle_parts(item: Any) -> tuple[Any, Any, Any, Any]:
    """(lease, outcome, reason, delay) of one settle_many item; absent parts are None."""
    if not isinstance(item, tuple) or len(item) not in (2, 3, 4):
        raise InvalidInput("", "must be (lease, outcome), (lease, outcome, reason) "
                           "or (lease, outcome, reason, delay)")
    return item + (None,) * (4 - len(item))


def _log_settled(result: Settled | LeaseLost) -> None:
    if isinstance(result, Settled) and result.state is State.QUARANTINED:
        log.warning("quarantined %s after %d attempts", result.event_id, result.attempts)
