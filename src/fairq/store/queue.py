"""All SQL of the queue: one method per verb, run inside one transaction.

QueueStore opens the file and hands out transactions; QueueTxn holds the SQL.
The facade (fairq.queue) validates input, picks the time a call runs at and
maps rows to values; it never sees SQL. Methods here never commit and never
read a wall clock: the time comes in as ``now_ms``. Batches are set-based: a
verb runs a handful of statements whatever the number of items.

The invariants every write keeps (the CHECKs in queue.sql hold most of them;
tests/conftest.py recounts the rest after every test):

* A flow's head is its lowest-seq unacked event; only heads have pass/turn.
  Acks happen in seq order, so a flow's unacked events are a suffix of it.
* A head's dispatch_ms is its next_at while ready, its lease_until while
  inflight, NULL while quarantined.
* runnable = 1 only for heads whose dispatch_ms the clock has reached; those,
  and only those, are in the rotation index.
* clock's *_n columns equal the number of events in each state: every verb
  records its transitions with _count and writes them with the clock.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from .. import policy
from .._json import canonical
from ..errors import Conflict, LeaseExpired, RedriveRefused, StaleLease
from ..policy import Backoff, from_ms
from ..types import Enqueued, Lease, Outcome, Settled, State, UndecodableBody
from .migrate import ensure_schema, refuse_foreign
from .reads import TOTALS, QueueReads, body_value
from .retention import body_hash
from .sqlite import Database, JoinedTransaction, Transaction


T = TypeVar("T")

log = logging.getLogger("fairq")

# A system clock reading clamped by more than this is worth a warning (once
# per stored clock value in a process): the stored clock was set ahead.
_AHEAD_WARNING_MS = round(policy.DEFAULT_MAX_CLOCK_SKEW * 1000)
_ahead_warned: list[int | None] = [None]


class NewEvent(NamedTuple):
    """A validated enqueue request: canonical body text, and when it is due:
    `delay_ms` after the call's time, or at `at_ms` if given (a schedule's
    slot, which may already have passed)."""

    event_id: str
    flow: str | None
    body: str
    delay_ms: int
    at_ms: int | None = None


class SettleItem(NamedTuple):
    """A validated settle request for one lease."""

    event_id: str
    generation: int
    outcome: Outcome
    reason: str | None
    delay: float | None


@dataclass
class _Clock:
    now_ms: int
    vtime: int
    tail: int
    turn: int
    claim_lag: str  # JSON array of bucket counts, parsed only when a first claim adds to it




class QueueStore:
    """A queue database file: opens it, migrates it, hands out transactions."""

    def __init__(self, path: Any, *, synchronous: str, busy_timeout: float,
                 seed: Callable[[sqlite3.Connection], None] | None = None) -> None:
        self.db = Database(path, synchronous=synchronous, busy_timeout=busy_timeout,
                           inspect=lambda conn: refuse_foreign(conn, path))
        try:
            # seed stores the opener's policy if this open creates or upgrades the file.
            self.version = ensure_schema(self.db, seed)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def transaction(self, name: str, conn: sqlite3.Connection | None = None) -> QueueTxn:
        """``with store.transaction(name) as tx:`` -- a write transaction; `name`
        labels its crash points. With `conn`, the writes join that connection's
        open transaction instead (sqlite.JoinedTransaction) and commit with it."""
        return QueueTxn(self.db, name, conn)

    def read(self, fn: Callable[[QueueReads], T]) -> T:
        """fn(reads) on a read-only snapshot."""
        return self.db.read(lambda conn: fn(QueueReads(conn)))


# The columns a settle, extend or redrive needs to judge a lease.
_FENCE_COLUMNS = (
    "SELECT event_id, id, flow_id, seq, state, generation, attempts, lifetime_attempts, "
    "lease_until_ms, owner, pass, turn, reason FROM event "
)


class _Held(NamedTuple):
    """An event row as a fence check sees it."""

    event_id: str
    id: int
    flow_id: int | None
    seq: int
    state: str
    generation: int
    attempts: int
    lifetime_attempts: int
    lease_until_ms: int | None
    owner: str | None
    pass_: int | None
    turn: int | None
    reason: str | None


class QueueTxn:
    """The SQL of every verb, bound to one open transaction (a context manager).

    The clock row is read once, when the call's time is set, and written once,
    just before COMMIT, with the new time, rotation counters and the state
    transitions the call made.
    """

    def __init__(self, db: Database, name: str, conn: sqlite3.Connection | None = None) -> None:
        self._transaction: Transaction | JoinedTransaction = (
            db.write(name, before_commit=self._flush) if conn is None
            else db.join(conn, before_commit=self._flush)
        )
        self._transaction_db = db
        self.connection: sqlite3.Connection = db.conn
        self._clock: _Clock | None = None
        self._moved: Counter[str] = Counter()  # state -> change in its event count
        self._totals: Counter[str] = Counter()  # TOTALS name -> how many more happened
        self._lags: list[int] | None = None  # claim lag bucket counts, once a first claim changes them
        self._dirty = False

    def __enter__(self) -> QueueTxn:
        self.connection = self._transaction.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._transaction.__exit__(*exc)

    def run_callback(self, fn: Callable[[sqlite3.Connection], Any], what: str) -> Any:
        """fn(conn) inside this transaction, which it must leave open (a settle effect)."""
        return self._transaction_db.run_callback(self.connection, fn, what)

    # -- the clock row -------------------------------------------------------

    def _load_clock(self) -> _Clock:
        if self._clock is None:
            # Read once per transaction; _flush writes it back once.
            row = self.connection.execute(
                "SELECT now_ms, vtime, tail, turn, claim_lag FROM clock WHERE id = 1"
            ).fetchone()
            self._clock = _Clock(*row)
        return self._clock

    def now(self, requested_ms: int, explicit: bool) -> int:
        """The time this call runs at; raises ClockError for an explicit time
        before the stored clock, clamps a wall clock that stepped back."""
        clock = self._load_clock()
        now_ms = policy.effective_now(requested_ms, clock.now_ms, explicit=explicit)
        if now_ms - requested_ms > _AHEAD_WARNING_MS and _ahead_warned[0] != now_ms:
            _ahead_warned[0] = now_ms
            log.warning("the queue's stored clock (%s) is %.0f s ahead of the system clock, which "
                        "it waits for: leases and backoffs stand still until then. If a time was "
                        "mistaken, run `fairq clock reset --reason ...` (Queue.reset_clock)",
                        now_ms / 1000, (now_ms - requested_ms) / 1000)
        if now_ms > clock.now_ms:
            clock.now_ms = now_ms
            self._dirty = True
        return now_ms

    def stored_now(self) -> int:
        """The stored clock (ms) as this transaction found it, or as it set it."""
        return self._load_clock().now_ms

    def rewind(self, to_ms: int) -> None:
        """Set the stored clock back to to_ms: only a clock reset does (store.clock)."""
        clock = self._load_clock()
        clock.now_ms = to_ms
        self._dirty = True

    def _next_turn(self) -> int:
        clock = self._load_clock()
        clock.turn += 1
        self._dirty = True
        return clock.turn

    def _count(self, before: str | None, after: str, n: int = 1) -> None:
        """Record that n events moved from state `before` (None: new) to `after`."""
        if n and before != after:
            if before is not None:
                self._moved[before] -= n
            self._moved[after] += n
            self._dirty = True

    def _removed(self, state: str, n: int) -> None:
        """Record that n events in `state` left the event table (purge)."""
        self._moved[state] -= n
        self._dirty = True

    def _happened(self, total: str, n: int = 1) -> None:
        """Add n to one of the TOTALS counters."""
        if n:
            self._totals[total] += n
            self._dirty = True

    def _claim_lag(self, lag_ms: int) -> None:
        """Add an event's first-claim lag to the histogram."""
        if self._lags is None:
            self._lags = policy.lag_counts(self._load_clock().claim_lag)
        self._lags[policy.lag_bucket(lag_ms)] += 1
        self._dirty = True

    def _flush(self) -> None:
        """Write the clock row once, before COMMIT, if this call changed it."""
        if not self._dirty:
            return
        clock = self._load_clock()
        moved, totals = self._moved, self._totals
        # The clock, rotation counters and totals only move forward (CHECK
        # keeps tail >= vtime); the state counts follow the transitions made.
        self.connection.execute(
            "UPDATE clock SET now_ms = :now_ms, vtime = :vtime, tail = :tail, turn = :turn, "
            "ready_n = ready_n + :ready, inflight_n = inflight_n + :inflight, "
            "acked_n = acked_n + :acked, quarantined_n = quarantined_n + :quarantined, "
            "enqueued_total = enqueued_total + :t_enqueued, claimed_total = claimed_total + :t_claimed, "
            "expired_total = expired_total + :t_expired, acked_total = acked_total + :t_acked, "
            "retried_total = retried_total + :t_retried, "
            "quarantined_total = quarantined_total + :t_quarantined, "
            "redriven_total = redriven_total + :t_redriven, "
            "claim_lag = coalesce(:claim_lag, claim_lag) WHERE id = 1",
            {"now_ms": clock.now_ms, "vtime": clock.vtime, "tail": clock.tail, "turn": clock.turn,
             "ready": moved["ready"], "inflight": moved["inflight"], "acked": moved["acked"],
             "quarantined": moved["quarantined"],
             **{f"t_{name}": totals[name] for name in TOTALS},
             "claim_lag": None if self._lags is None else json.dumps(self._lags)},
        )
        self._dirty = False

    # -- enqueue -------------------------------------------------------------

    def enqueue_many(self, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
        """Store each new event at the end of its flow; identical repeats collapse.

        Any conflict raises before anything is written.
        """
        conn = self.connection
        # An event id names one (flow, body) forever: a repeat must match it,
        # and so must a repeat of a purged id, while its tombstone is kept
        # (an id is never in both tables).
        stored = {
            row[0]: row
            for row in conn.execute(
                "SELECT e.event_id, f.name, e.seq, e.body FROM event AS e "
                "LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
                "WHERE e.event_id IN (SELECT value FROM json_each(:ids)) "
                "UNION ALL "
                "SELECT t.event_id, f.name, t.seq, t.body_hash FROM tombstone AS t "
                "LEFT JOIN flow AS f ON f.flow_id = t.flow_id "
                "WHERE t.event_id IN (SELECT value FROM json_each(:ids))",
                {"ids": json.dumps([item.event_id for item in items])},
            )
        }
        fresh: dict[str, NewEvent] = {}
        for item in items:
            if item.event_id in stored:
                _check_repeat(item, stored[item.event_id][1], stored[item.event_id][3])
            elif item.event_id in fresh:
                earlier = fresh[item.event_id]
                _check_repeat(item, earlier.flow, earlier.body)
            else:
                fresh[item.event_id] = item
        seqs = self._insert_events(list(fresh.values()), now_ms) if fresh else {}
        out = []
        created: set[str] = set()
        for item in items:
            if item.event_id in seqs and item.event_id not in created:
                created.add(item.event_id)
                out.append(Enqueued(item.event_id, item.flow, seqs[item.event_id], True))
            else:
                seq = stored[item.event_id][2] if item.event_id in stored else seqs[item.event_id]
                out.append(Enqueued(item.event_id, item.flow, seq, False))
        return out

    def _insert_events(self, items: list[NewEvent], now_ms: int) -> dict[str, int]:
        """Insert new events; returns their seqs. An event that finds its flow
        idle becomes its head and joins the rotation behind every flow in it."""
        conn = self.connection
        clock = self._load_clock()
        flows = self._allocate_seqs(Counter(item.flow for item in items if item.flow is not None))
        rows = []
        seqs = {}
        for item in items:
            next_at = now_ms + item.delay_ms if item.at_ms is None else item.at_ms
            if item.flow is None:
                flow_id, seq, head = None, 1, True
            else:
                slot = flows[item.flow]
                flow_id, seq, head = slot[0], slot[1], not slot[2]
                slot[1] += 1
                slot[2] = True  # later events of this flow in the batch queue behind
            rows.append({
                "event_id": item.event_id, "flow_id": flow_id, "seq": seq, "body": item.body,
                "now_ms": now_ms, "next_at_ms": next_at,
                "pass": clock.tail if head else None,
                "turn": self._next_turn() if head else None,
                "dispatch_ms": next_at if head else None,
                "runnable": int(head and next_at <= now_ms),
            })
            seqs[item.event_id] = seq
        # Only heads get a rotation place and a dispatch time.
        conn.executemany(
            "INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms, "
            "pass, turn, dispatch_ms, runnable) VALUES (:event_id, :flow_id, :seq, :body, 'ready', "
            ":now_ms, :next_at_ms, :next_at_ms, :pass, :turn, :dispatch_ms, :runnable)",
            rows,
        )
        self._count(None, "ready", len(rows))
        self._happened("enqueued", len(rows))
        return seqs

    def _allocate_seqs(self, counts: Counter[str]) -> dict[str, list[Any]]:
        """For each named flow: [flow_id, first new seq, whether it already has a head]."""
        if not counts:
            return {}
        conn = self.connection
        # Each flow hands out its next `count` seqs; a new flow starts at 1.
        allocated = conn.execute(
            "INSERT INTO flow (name, next_seq) SELECT key, 1 + value FROM json_each(:counts) WHERE true "
            "ON CONFLICT (name) DO UPDATE SET next_seq = next_seq + excluded.next_seq - 1 "
            "RETURNING flow_id, name, next_seq",
            {"counts": json.dumps(counts)},
        ).fetchall()
        flows = {name: [flow_id, next_seq - counts[name], False] for flow_id, name, next_seq in allocated}
        # A flow already has a head iff its last event before this batch is
        # unacked (its unacked events are a suffix).
        last = [[slot[0], slot[1] - 1] for slot in flows.values() if slot[1] > 1]
        if last:
            busy = {
                row[0]
                for row in conn.execute(
                    "SELECT e.flow_id FROM json_each(:last) AS j JOIN event AS e "
                    "ON e.flow_id = json_extract(j.value, '$[0]') AND e.seq = json_extract(j.value, '$[1]') "
                    "WHERE e.state != 'acked'",
                    {"last": json.dumps(last)},
                )
            }
            for slot in flows.values():
                slot[2] = slot[0] in busy
        return flows

    # -- claim ---------------------------------------------------------------

    def claim_many(
        self, n: int, *, owner: str | None, now_ms: int, lease_ms: int, max_attempts: int
    ) -> list[Lease]:
        """Claim up to n heads, one per flow, lowest rotation position first."""
        conn = self.connection
        # Heads whose time has come (delay or backoff over, lease expired)
        # enter the rotation index; heads still waiting cost nothing here.
        promoted = conn.execute(
            "UPDATE event SET runnable = 1 WHERE runnable = 0 AND dispatch_ms <= :now_ms",
            {"now_ms": now_ms},
        ).rowcount
        clock = self._load_clock()
        leases: list[Lease] = []
        lease_until = now_ms + lease_ms
        lease_until_s = lease_until / 1000
        from_ready = 0  # claims of ready heads; the others reclaim an expired lease
        exhausted = False
        while len(leases) < n and not exhausted:
            limit = n - len(leases)
            # Only heads in the rotation index are read, in rotation order.
            rows = conn.execute(
                "SELECT e.id, e.event_id, f.name, f.weight, e.seq, e.body, e.pass, e.state, "
                "e.generation, e.attempts, e.lifetime_attempts, e.lease_until_ms, e.owner, "
                "e.due_ms, e.first_claim_ms "
                "FROM event AS e INDEXED BY event_rotation LEFT JOIN flow AS f ON f.flow_id = e.flow_id "
                "WHERE e.runnable = 1 ORDER BY e.pass, e.turn LIMIT :limit",
                {"limit": limit},
            ).fetchall()
            exhausted = len(rows) < limit  # a short page: nothing else is runnable
            claimed = []
            for (rowid, event_id, name, weight, seq, body, pass_, state, generation,
                 attempts, lifetime, old_lease_until, old_owner, due_ms, first_claim_ms) in rows:
                if state != "ready":
                    self._happened("expired")
                value = body_value(body)
                if isinstance(value, UndecodableBody):
                    self._quarantine_undecodable(rowid, event_id, state, generation, value, now_ms)
                    continue
                if state == "ready":
                    from_ready += 1
                else:
                    if attempts >= max_attempts:
                        self._quarantine_spent_lease(rowid, event_id, generation, attempts, lifetime,
                                                     old_lease_until, old_owner, now_ms, max_attempts)
                        continue
                    self.record(event_id, "expired", "lease expired before the holder settled",
                                old_owner, generation, now_ms,
                                {"lease_until": from_ms(old_lease_until), "attempts": attempts})
                if first_claim_ms is None:
                    self._claim_lag(now_ms - due_ms)
                # The turn is taken now, at claim time, not when the work succeeds.
                start = pass_ if pass_ > clock.vtime else clock.vtime
                new_pass = start + policy.stride(weight or 1)
                clock.vtime = start
                if new_pass > clock.tail:
                    clock.tail = new_pass
                clock.turn += 1
                claimed.append({"id": rowid, "pass": new_pass, "turn": clock.turn,
                                "lease_until_ms": lease_until, "owner": owner, "now_ms": now_ms})
                leases.append(Lease(event_id, name, seq, value, generation + 1,
                                    attempts + 1, lifetime + 1, owner, lease_until_s))
            # The claimed head becomes inflight with a new generation, its
            # attempt counted durably before any work starts, and waits in the
            # waiting index until its lease ends or it is settled.
            conn.executemany(
                "UPDATE event SET state = 'inflight', generation = generation + 1, "
                "attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1, "
                "next_at_ms = NULL, lease_until_ms = :lease_until_ms, owner = :owner, "
                "first_claim_ms = coalesce(first_claim_ms, :now_ms), pass = :pass, turn = :turn, "
                "dispatch_ms = :lease_until_ms, runnable = 0 WHERE id = :id",
                claimed,
            )
        self._count("ready", "inflight", from_ready)
        self._happened("claimed", len(leases))
        if not promoted and not self._moved and not self._totals:
            # An idle claim decided nothing that depends on its time: it need
            # not store it, so polling an idle queue writes (and syncs) nothing.
            self._dirty = False
        return leases

    def _quarantine_spent_lease(
        self, rowid: int, event_id: str, generation: int, attempts: int, lifetime: int,
        lease_until_ms: int, old_owner: str | None, now_ms: int, max_attempts: int,
    ) -> None:
        """An expired head whose round budget is spent stops, and blocks its flow."""
        reason = f"lease expired after attempt {attempts} of {max_attempts}; retry budget spent"
        self._quarantine([{"id": rowid, "reason": reason}])
        self._count("inflight", "quarantined")
        self._happened("quarantined")
        self.record(event_id, "quarantine", reason, old_owner, generation, now_ms,
                    {"cause": "attempts_exhausted", "attempts": attempts,
                     "lifetime_attempts": lifetime, "lease_until": from_ms(lease_until_ms)})

    def _quarantine_undecodable(self, rowid: int, event_id: str, state: str, generation: int,
                                body: UndecodableBody, now_ms: int) -> None:
        """A head whose stored body cannot be decoded here stops, instead of
        stalling every claim that reaches it; a redrive gives it a new round."""
        self._quarantine([{"id": rowid, "reason": f"undecodable_body: {body.problem}"}])
        self._count(state, "quarantined")
        self._happened("quarantined")
        self.record(event_id, "quarantine", "undecodable_body", None, generation, now_ms,
                    {"cause": "undecodable_body", "problem": body.problem})

    def _quarantine(self, rows: list[dict[str, Any]]) -> None:
        # A quarantined head keeps its rotation place and keeps blocking its
        # flow, but leaves both dispatch indexes.
        self.connection.executemany(
            "UPDATE event SET state = 'quarantined', lease_until_ms = NULL, next_at_ms = NULL, "
            "dispatch_ms = NULL, runnable = 0, reason = :reason WHERE id = :id",
            rows,
        )

    # -- settle and extend ---------------------------------------------------

    def _held(self, event_ids: list[str]) -> dict[str, _Held]:
        # The rows the fence judges, by the event_id index, read under the write lock.
        rows = self.connection.execute(
            _FENCE_COLUMNS + "WHERE event_id IN (SELECT value FROM json_each(:ids))",
            {"ids": json.dumps(event_ids)},
        )
        return {row[0]: _Held._make(row) for row in rows}

    def check_fence(self, event_id: str, generation: int, now_ms: int) -> None:
        """Raise StaleLease or LeaseExpired unless this lease may settle now."""
        lost = _fence(self._held([event_id]).get(event_id), event_id, generation, now_ms)
        if lost is not None:
            raise lost

    def settle_many(
        self, items: Sequence[SettleItem], *, now_ms: int, max_attempts: int, backoff: Backoff
    ) -> list[Settled | StaleLease | LeaseExpired]:
        """Settle each lease on its own; a lost lease is reported in its slot."""
        held = self._held([item.event_id for item in items])
        out: list[Settled | StaleLease | LeaseExpired] = []
        acked, next_heads, retried, released, quarantined, audits = [], [], [], [], [], []
        settled: set[str] = set()  # a second settle of one event in this batch is stale
        for item in items:
            row = held.get(item.event_id)
            lost = _fence(row, item.event_id, item.generation, now_ms, item.event_id in settled)
            if lost is not None:
                out.append(lost)
                continue
            assert row is not None
            settled.add(item.event_id)
            if item.outcome is Outcome.ACK:
                acked.append({"id": row.id, "now_ms": now_ms})
                if row.flow_id is not None:
                    next_heads.append({"flow_id": row.flow_id, "seq": row.seq + 1, "pass": row.pass_,
                                       "turn": row.turn, "now_ms": now_ms})
                out.append(Settled(item.event_id, State.ACKED, None, row.attempts))
                continue
            if item.outcome is Outcome.RELEASE:
                released.append({"id": row.id, "now_ms": now_ms})
                out.append(Settled(item.event_id, State.READY, from_ms(now_ms), row.attempts - 1))
                continue
            decision = policy.decide(
                item.outcome, event_id=item.event_id, generation=row.generation,
                attempts=row.attempts, max_attempts=max_attempts, now_ms=now_ms,
                delay=item.delay, backoff=backoff,
            )
            if decision.state is State.READY:
                retried.append({"id": row.id, "next_at_ms": decision.next_at_ms,
                                "runnable": int(decision.next_at_ms <= now_ms), "reason": item.reason})
                audits.append(_audit_row(item.event_id, "retry", item.reason, row.owner, row.generation,
                                         now_ms, {"attempts": row.attempts,
                                                  "next_at": from_ms(decision.next_at_ms)}))
            else:
                reason = item.reason or decision.quarantine_cause
                quarantined.append({"id": row.id, "reason": reason})
                audits.append(_audit_row(item.event_id, "quarantine", reason, row.owner,
                                         row.generation, now_ms,
                                         {"cause": decision.quarantine_cause, "attempts": row.attempts,
                                          "lifetime_attempts": row.lifetime_attempts}))
            out.append(Settled(item.event_id, decision.state, from_ms(decision.next_at_ms), row.attempts))
        for state, rows in ((State.ACKED, acked), (State.READY, retried), (State.QUARANTINED, quarantined)):
            self._count("inflight", state.value, len(rows))
            self._happened(_TOTAL_FOR[state], len(rows))
        self._count("inflight", "ready", len(released))
        conn = self.connection
        if acked:
            # Acked is final: the event leaves the dispatch indexes for good.
            conn.executemany(
                "UPDATE event SET state = 'acked', lease_until_ms = NULL, settled_ms = :now_ms, "
                "pass = NULL, turn = NULL, dispatch_ms = NULL, runnable = 0 WHERE id = :id",
                acked,
            )
        if next_heads:
            # The next seq (there are no gaps) becomes the head and inherits
            # the flow's rotation place; no row: the flow is idle now.
            conn.executemany(
                "UPDATE event SET pass = :pass, turn = :turn, dispatch_ms = next_at_ms, "
                "runnable = next_at_ms <= :now_ms WHERE flow_id = :flow_id AND seq = :seq",
                next_heads,
            )
        if retried:
            # Back to ready: still the head, claimable again from next_at.
            conn.executemany(
                "UPDATE event SET state = 'ready', lease_until_ms = NULL, next_at_ms = :next_at_ms, "
                "dispatch_ms = :next_at_ms, runnable = :runnable, reason = :reason WHERE id = :id",
                retried,
            )
        if released:
            # Given back unused: ready at once, and the claim is not counted
            # against the round's budget (lifetime_attempts keeps it).
            conn.executemany(
                "UPDATE event SET state = 'ready', lease_until_ms = NULL, next_at_ms = :now_ms, "
                "dispatch_ms = :now_ms, runnable = 1, attempts = attempts - 1 WHERE id = :id",
                released,
            )
        if quarantined:
            self._quarantine(quarantined)
        if audits:
            self._append_audit(audits)
        return out

    def extend(self, event_id: str, generation: int, *, lease_ms: int, now_ms: int) -> Lease:
        """Move a live lease's end to now + lease_ms (fenced like settle)."""
        row = self._held([event_id]).get(event_id)
        lost = _fence(row, event_id, generation, now_ms)
        if lost is not None:
            raise lost
        assert row is not None
        # Only the current holder's lease moves; the head's dispatch time follows it.
        got = self.connection.execute(
            "UPDATE event SET lease_until_ms = :lease_until_ms, dispatch_ms = :lease_until_ms "
            "WHERE id = :id RETURNING seq, body, generation, attempts, lifetime_attempts, owner, "
            "lease_until_ms",
            {"id": row.id, "lease_until_ms": now_ms + lease_ms},
        ).fetchone()
        return Lease(event_id, self._flow_name(row.flow_id), got[0], body_value(got[1]), *got[2:6],
                     got[6] / 1000)

    def _flow_name(self, flow_id: int | None) -> str | None:
        if flow_id is None:
            return None
        # A flow's name never changes.
        return self.connection.execute(
            "SELECT name FROM flow WHERE flow_id = :flow_id", {"flow_id": flow_id}
        ).fetchone()[0]

    # -- redrive ---------------------------------------------------------------

    def redrive(
        self, event_id: str, *, expected_generation: int, reason: str, actor: str | None, now_ms: int
    ) -> int:
        """Give a quarantined head a new round; returns its new generation."""
        row = self._held([event_id]).get(event_id)
        if row is None:
            raise RedriveRefused(event_id, f"event {event_id!r} does not exist")
        if row.state != "quarantined":
            raise RedriveRefused(event_id, f"event {event_id!r} is {row.state}, not quarantined")
        if row.generation != expected_generation:
            raise RedriveRefused(
                event_id, f"event {event_id!r} is at generation {row.generation}, not {expected_generation}"
            )
        generation = row.generation + 1
        # A new round: attempts reset, lifetime_attempts kept, the old reason
        # moves to the audit row. The generation moves on, so no holder from
        # before the quarantine can settle. Still the head, in its old
        # rotation place, claimable now.
        self.connection.execute(
            "UPDATE event SET state = 'ready', generation = :generation, attempts = 0, "
            "next_at_ms = :now_ms, dispatch_ms = :now_ms, runnable = 1, reason = NULL "
            "WHERE id = :id AND state = 'quarantined'",
            {"id": row.id, "generation": generation, "now_ms": now_ms},
        )
        self._count("quarantined", "ready")
        self._happened("redriven")
        self._append_audit([_audit_row(event_id, "redrive", reason, actor, generation, now_ms,
                                       {"replaced_reason": row.reason, "attempts": row.attempts,
                                        "lifetime_attempts": row.lifetime_attempts})])
        return generation

    # -- configuration ---------------------------------------------------------

    def set_weight(self, name: str, weight: int) -> None:
        """Set a flow's weight, creating the flow if it has never been seen."""
        # Only the weight changes; a new flow's seqs start at 1.
        self.connection.execute(
            "INSERT INTO flow (name, weight) VALUES (:name, :weight) "
            "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight",
            {"name": name, "weight": weight},
        )

    # -- audit -----------------------------------------------------------------

    def record(self, event_id: str, action: str, reason: str | None, actor: str | None,
               generation: int | None, now_ms: int, detail: dict[str, Any]) -> None:
        """Append one audit row."""
        self._append_audit([_audit_row(event_id, action, reason, actor, generation, now_ms, detail)])

    def append_misfires(self, misfires: Sequence[tuple[str, str, dict[str, Any]]], now_ms: int) -> None:
        """Record schedule slots that did not become instances: (instance id, reason, detail)."""
        self._append_audit([_audit_row(event_id, "misfire", reason, None, None, now_ms, detail)
                            for event_id, reason, detail in misfires])

    def _append_audit(self, rows: list[dict[str, Any]]) -> None:
        # Audit rows are appended, never changed.
        self.connection.executemany(
            "INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail) "
            "VALUES (:event_id, :action, :reason, :actor, :generation, :at_ms, :detail)",
            rows,
        )

_TOTAL_FOR = {State.ACKED: "acked", State.READY: "retried", State.QUARANTINED: "quarantined"}


def _fence(row: _Held | None, event_id: str, generation: int, now_ms: int,
           settled: bool = False) -> StaleLease | LeaseExpired | None:
    """Why this lease may not act now, or None if it may.

    The generation is checked before the time, so a holder whose event was
    claimed again hears StaleLease even if its own lease also ran out.
    `settled`: the event was already settled earlier in the same batch.
    """
    if settled:
        return StaleLease(event_id, generation, f"event {event_id!r} was settled earlier in this batch")
    if row is None:
        return StaleLease(event_id, generation, f"event {event_id!r} does not exist")
    if row.generation != generation:
        return StaleLease(event_id, generation,
                          f"event {event_id!r} is at generation {row.generation}, this lease holds {generation}")
    if row.state != "inflight":
        return StaleLease(event_id, generation, f"event {event_id!r} is {row.state}, not inflight")
    assert row.lease_until_ms is not None
    if now_ms >= row.lease_until_ms:
        return LeaseExpired(event_id, generation,
                            f"lease on {event_id!r} (generation {generation}) ended at "
                            f"{row.lease_until_ms / 1000}, now is {now_ms / 1000}")
    return None


def _audit_row(event_id: str, action: str, reason: str | None, actor: str | None,
               generation: int | None, now_ms: int, detail: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": event_id, "action": action, "reason": reason, "actor": actor,
            "generation": generation, "at_ms": now_ms,
            "detail": canonical(detail)}


def _check_repeat(item: NewEvent, stored_flow: str | None, stored_body: str | bytes) -> None:
    """An enqueue of a known id must match it exactly, or nothing is written.

    stored_body is the canonical body, or the hash a tombstone keeps of it.
    """
    if stored_flow != item.flow:
        raise Conflict(
            item.event_id, "flow",
            f"event {item.event_id!r} is already stored {_in_flow(stored_flow)}, not {_in_flow(item.flow)}",
        )
    body = body_hash(item.body) if isinstance(stored_body, bytes) else item.body
    if stored_body != body:
        raise Conflict(item.event_id, "body")


def _in_flow(flow: str | None) -> str:
    """Where an event is, for messages: "in flow 'A'" or "in a flow of its own"."""
    return "in a flow of its own" if flow is None else f"in flow {flow!r}"
