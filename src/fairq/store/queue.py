"""All SQL of the queue: one method per verb, run inside one transaction.

QueueStore opens the file and hands out transactions; QueueTxn holds the SQL.
The facade (fairq.queue) validates input, picks the time a call runs at and
maps rows to values; it never sees SQL. Methods here never commit and never
read a wall clock: the time comes in as ``now_ms``.

The invariants every write keeps (tests/test_invariants.py checks them after
each scenario):

* flow.head_id is the lowest-seq unacked event of the flow, or NULL.
* flow.due_ms is when that head becomes claimable: its next_at while ready,
  its lease_until while inflight, NULL while quarantined or without a head.
* flow.runnable = 1 exactly for flows whose due_ms has been reached by a
  claim's promotion step or a settle; only those are in the rotation index.
* tally.n equals the number of events in each state (kept by triggers).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import policy
from ..errors import Conflict, FairqError, LeaseExpired, RedriveRefused, StaleLease
from ..policy import Backoff, from_ms
from ..types import AuditEntry, Enqueued, EventInfo, Lease, Outcome, Settled, State, Stats
from .migrate import ensure_schema
from .sqlite import Database


@dataclass(frozen=True)
class NewEvent:
    """A validated enqueue request: canonical body text, delay in ms."""

    event_id: str
    flow: str | None
    body: str
    delay_ms: int


@dataclass(frozen=True)
class SettleItem:
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


class QueueStore:
    """A queue database file: opens it, migrates it, hands out transactions."""

    def __init__(self, path: Any, *, synchronous: str, busy_timeout: float) -> None:
        self.db = Database(path, synchronous=synchronous, busy_timeout=busy_timeout)
        try:
            self.version = ensure_schema(self.db)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def transaction(self, name: str) -> Iterator[QueueTxn]:
        """A write transaction; `name` labels its crash points."""
        with self.db.write(name) as conn:
            tx = QueueTxn(conn)
            yield tx
            tx.flush()

    @contextlib.contextmanager
    def reading(self) -> Iterator[QueueTxn]:
        """A read-only snapshot."""
        with self.db.read() as conn:
            yield QueueTxn(conn)


class QueueTxn:
    """The SQL of every verb, bound to one open transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.connection = conn
        self._clock: _Clock | None = None
        self._clock_dirty = False

    # -- the clock row -------------------------------------------------------

    def _load_clock(self) -> _Clock:
        if self._clock is None:
            row = self.connection.execute(
                "SELECT now_ms, vtime, tail, turn FROM clock WHERE id = 1"
            ).fetchone()
            self._clock = _Clock(*row)
        return self._clock

    def now(self, requested_ms: int, explicit: bool) -> int:
        """The time this call runs at; moves the stored clock forward if needed."""
        clock = self._load_clock()
        now_ms = policy.effective_now(requested_ms, clock.now_ms, explicit=explicit)
        if now_ms > clock.now_ms:
            clock.now_ms = now_ms
            self._clock_dirty = True
        return now_ms

    def _next_turn(self) -> int:
        clock = self._load_clock()
        clock.turn += 1
        self._clock_dirty = True
        return clock.turn

    def flush(self) -> None:
        """Write the clock row once, at the end of the transaction, if it changed."""
        if self._clock_dirty and self._clock is not None:
            # The clock and rotation counters only move forward (CHECKs keep tail >= vtime).
            self.connection.execute(
                "UPDATE clock SET now_ms = :now_ms, vtime = :vtime, tail = :tail, turn = :turn "
                "WHERE id = 1",
                vars(self._clock),
            )
            self._clock_dirty = False

    # -- enqueue -------------------------------------------------------------

    def enqueue_many(self, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
        """Store each new event at the end of its flow; identical repeats collapse."""
        conn = self.connection
        out: list[Enqueued] = []
        for item in items:
            # An event id names one (flow, body) forever: a repeat must match it.
            found = conn.execute(
                "SELECT f.name, e.seq, e.body FROM event AS e JOIN flow AS f ON f.flow_id = e.flow_id "
                "WHERE e.event_id = :event_id",
                {"event_id": item.event_id},
            ).fetchone()
            if found is not None:
                out.append(_repeat(item, *found))
                continue
            flow_id, seq, has_head = self._flow_for_new_event(item.flow)
            next_at_ms = now_ms + item.delay_ms
            # The new event takes the flow's next seq; seqs have no gaps.
            event_rowid = conn.execute(
                "INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, next_at_ms, due_ms) "
                "VALUES (:event_id, :flow_id, :seq, :body, 'ready', :now_ms, :next_at_ms, :next_at_ms)",
                {
                    "event_id": item.event_id,
                    "flow_id": flow_id,
                    "seq": seq,
                    "body": item.body,
                    "now_ms": now_ms,
                    "next_at_ms": next_at_ms,
                },
            ).lastrowid
            if has_head:
                # Not the head: the flow only hands out its next seq.
                conn.execute(
                    "UPDATE flow SET next_seq = next_seq + 1 WHERE flow_id = :flow_id",
                    {"flow_id": flow_id},
                )
            else:
                # An idle flow (re)joins the rotation behind every flow already in it.
                clock = self._load_clock()
                conn.execute(
                    "UPDATE flow SET next_seq = next_seq + 1, head_id = :head_id, due_ms = :due_ms, "
                    "runnable = 0, pass = :pass, turn = :turn WHERE flow_id = :flow_id",
                    {
                        "flow_id": flow_id,
                        "head_id": event_rowid,
                        "due_ms": next_at_ms,
                        "pass": clock.tail,
                        "turn": self._next_turn(),
                    },
                )
            out.append(Enqueued(item.event_id, item.flow, seq, True))
        return out

    def _flow_for_new_event(self, name: str | None) -> tuple[int, int, bool]:
        """(flow_id, seq for the new event, whether the flow already has a head)."""
        conn = self.connection
        if name is not None:
            row = conn.execute(
                "SELECT flow_id, next_seq, head_id FROM flow WHERE name = :name", {"name": name}
            ).fetchone()
            if row is not None:
                return row[0], row[1], row[2] is not None
        # A new flow; its rotation place is set when its first event arrives.
        flow_id = conn.execute(
            "INSERT INTO flow (name, pass, turn) VALUES (:name, 0, 0)", {"name": name}
        ).lastrowid
        return flow_id, 1, False

    # -- claim ---------------------------------------------------------------

    def claim_many(
        self, n: int, *, owner: str | None, now_ms: int, lease_ms: int, max_attempts: int
    ) -> list[Lease]:
        """Claim up to n heads, one per flow, lowest rotation position first."""
        conn = self.connection
        # Heads whose time has come (backoff over, delay over, lease expired)
        # enter the rotation index; flows still waiting cost nothing here.
        conn.execute(
            "UPDATE flow SET runnable = 1 WHERE runnable = 0 AND due_ms <= :now_ms",
            {"now_ms": now_ms},
        )
        leases: list[Lease] = []
        clock = self._load_clock()
        exhausted = False
        while len(leases) < n and not exhausted:
            # Only flows in the rotation index are read, in rotation order.
            limit = n - len(leases)
            rows = conn.execute(
                "SELECT f.flow_id, f.name, f.weight, f.pass, e.id, e.event_id, e.seq, e.body, "
                "e.state, e.generation, e.attempts, e.lifetime_attempts, e.lease_until_ms, e.owner "
                "FROM flow AS f INDEXED BY flow_rotation JOIN event AS e ON e.id = f.head_id "
                "WHERE f.runnable = 1 ORDER BY f.pass, f.turn LIMIT :limit",
                {"limit": limit},
            ).fetchall()
            exhausted = len(rows) < limit  # a short page: no more runnable flows
            claimed_events = []
            claimed_flows = []
            for (flow_id, name, weight, pass_, rowid, event_id, seq, body, state,
                 generation, attempts, lifetime, lease_until_ms, old_owner) in rows:
                if state == "inflight":
                    if attempts >= max_attempts:
                        self._quarantine_spent_lease(
                            flow_id, rowid, event_id, generation, attempts, lifetime,
                            lease_until_ms, old_owner, now_ms, max_attempts,
                        )
                        continue
                    self._audit(event_id, "expired", "lease expired before the holder settled",
                                old_owner, generation, now_ms,
                                {"lease_until": from_ms(lease_until_ms), "attempts": attempts})
                # The turn is taken now, at claim time, not when the work succeeds.
                start = max(pass_, clock.vtime)
                new_pass = start + policy.stride(weight)
                clock.vtime = start
                clock.tail = max(clock.tail, new_pass)
                lease_until = now_ms + lease_ms
                claimed_events.append({"id": rowid, "lease_until_ms": lease_until,
                                       "owner": owner, "now_ms": now_ms})
                claimed_flows.append({"flow_id": flow_id, "pass": new_pass,
                                      "turn": self._next_turn(), "due_ms": lease_until})
                leases.append(Lease(event_id, name, seq, json.loads(body), generation + 1,
                                    attempts + 1, lifetime + 1, owner, lease_until / 1000))
            # The claimed head becomes inflight with a new generation; the
            # attempt is counted durably before any work starts.
            conn.executemany(
                "UPDATE event SET state = 'inflight', generation = generation + 1, "
                "attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1, "
                "next_at_ms = NULL, lease_until_ms = :lease_until_ms, owner = :owner, "
                "first_claim_ms = coalesce(first_claim_ms, :now_ms) WHERE id = :id",
                claimed_events,
            )
            # The flow leaves the rotation index until its lease ends or it is settled.
            conn.executemany(
                "UPDATE flow SET pass = :pass, turn = :turn, due_ms = :due_ms, runnable = 0 "
                "WHERE flow_id = :flow_id",
                claimed_flows,
            )
        return leases

    def _quarantine_spent_lease(
        self, flow_id: int, rowid: int, event_id: str, generation: int, attempts: int,
        lifetime: int, lease_until_ms: int, old_owner: str | None, now_ms: int, max_attempts: int,
    ) -> None:
        """An expired head whose round budget is spent stops, and blocks its flow."""
        reason = f"lease expired after attempt {attempts} of {max_attempts}; retry budget spent"
        self._set_quarantined(flow_id, rowid, reason)
        self._audit(event_id, "quarantine", reason, old_owner, generation, now_ms,
                    {"cause": "attempts_exhausted", "attempts": attempts,
                     "lifetime_attempts": lifetime, "lease_until": from_ms(lease_until_ms)})

    def _set_quarantined(self, flow_id: int, rowid: int, reason: str) -> None:
        # A quarantined head keeps blocking its flow: the flow leaves both indexes.
        self.connection.execute(
            "UPDATE event SET state = 'quarantined', lease_until_ms = NULL, next_at_ms = NULL, "
            "reason = :reason WHERE id = :id",
            {"id": rowid, "reason": reason},
        )
        self.connection.execute(
            "UPDATE flow SET due_ms = NULL, runnable = 0 WHERE flow_id = :flow_id",
            {"flow_id": flow_id},
        )

    # -- settle and extend ---------------------------------------------------

    def _fenced(self, event_id: str, generation: int, now_ms: int) -> tuple:
        """The inflight row a lease may act on, or raise why it may not.

        The generation is checked before the time, so a holder whose event was
        claimed again hears StaleLease even if its own lease also ran out.
        """
        row = self.connection.execute(
            "SELECT id, flow_id, seq, state, generation, attempts, lifetime_attempts, "
            "lease_until_ms, owner FROM event WHERE event_id = :event_id",
            {"event_id": event_id},
        ).fetchone()
        if row is None:
            raise StaleLease(event_id, generation, f"event {event_id!r} does not exist")
        state, current, lease_until_ms = row[3], row[4], row[7]
        if current != generation:
            raise StaleLease(
                event_id, generation,
                f"event {event_id!r} is at generation {current}, this lease holds {generation}",
            )
        if state != "inflight":
            raise StaleLease(event_id, generation, f"event {event_id!r} is {state}, not inflight")
        if now_ms >= lease_until_ms:
            raise LeaseExpired(
                event_id, generation,
                f"lease on {event_id!r} (generation {generation}) ended at "
                f"{lease_until_ms / 1000}, now is {now_ms / 1000}",
            )
        return row

    def check_fence(self, event_id: str, generation: int, now_ms: int) -> None:
        """Raise StaleLease or LeaseExpired unless this lease may settle now."""
        self._fenced(event_id, generation, now_ms)

    def settle_many(
        self, items: Sequence[SettleItem], *, now_ms: int, max_attempts: int, backoff: Backoff
    ) -> list[Settled | StaleLease | LeaseExpired]:
        """Settle each lease on its own; a lost lease is reported in its slot."""
        out: list[Settled | StaleLease | LeaseExpired] = []
        for item in items:
            try:
                row = self._fenced(item.event_id, item.generation, now_ms)
            except (StaleLease, LeaseExpired) as lost:
                out.append(lost)
                continue
            rowid, flow_id, seq, _, generation, attempts, lifetime, _, owner = row
            decision = policy.decide(
                item.outcome, event_id=item.event_id, generation=generation, attempts=attempts,
                max_attempts=max_attempts, now_ms=now_ms, delay=item.delay, backoff=backoff,
            )
            if decision.state is State.ACKED:
                self._ack(rowid, flow_id, seq, now_ms)
            elif decision.state is State.READY:
                self._requeue(rowid, flow_id, decision.next_at_ms, item.reason, now_ms)
                self._audit(item.event_id, "retry", item.reason, owner, generation, now_ms,
                            {"attempts": attempts, "next_at": from_ms(decision.next_at_ms)})
            else:
                self._set_quarantined(flow_id, rowid, item.reason or decision.quarantine_cause)
                self._audit(item.event_id, "quarantine", item.reason, owner, generation, now_ms,
                            {"cause": decision.quarantine_cause, "attempts": attempts,
                             "lifetime_attempts": lifetime})
            out.append(Settled(item.event_id, decision.state, from_ms(decision.next_at_ms), attempts))
        return out

    def _ack(self, rowid: int, flow_id: int, seq: int, now_ms: int) -> None:
        conn = self.connection
        # Acked is final; the lease is gone.
        conn.execute(
            "UPDATE event SET state = 'acked', lease_until_ms = NULL, settled_ms = :now_ms "
            "WHERE id = :id",
            {"id": rowid, "now_ms": now_ms},
        )
        # The next seq of the flow (there are no gaps) becomes its head.
        nxt = conn.execute(
            "SELECT id, next_at_ms FROM event WHERE flow_id = :flow_id AND seq = :seq",
            {"flow_id": flow_id, "seq": seq + 1},
        ).fetchone()
        if nxt is None:
            conn.execute(
                "UPDATE flow SET head_id = NULL, due_ms = NULL, runnable = 0 WHERE flow_id = :flow_id",
                {"flow_id": flow_id},
            )
        else:
            conn.execute(
                "UPDATE flow SET head_id = :head_id, due_ms = :due_ms, runnable = :due_ms <= :now_ms "
                "WHERE flow_id = :flow_id",
                {"flow_id": flow_id, "head_id": nxt[0], "due_ms": nxt[1], "now_ms": now_ms},
            )

    def _requeue(self, rowid: int, flow_id: int, next_at_ms: int, reason: str | None, now_ms: int) -> None:
        # Back to ready: same head, claimable again from next_at.
        self.connection.execute(
            "UPDATE event SET state = 'ready', lease_until_ms = NULL, next_at_ms = :next_at_ms, "
            "reason = coalesce(:reason, reason) WHERE id = :id",
            {"id": rowid, "next_at_ms": next_at_ms, "reason": reason},
        )
        self.connection.execute(
            "UPDATE flow SET due_ms = :due_ms, runnable = :due_ms <= :now_ms WHERE flow_id = :flow_id",
            {"flow_id": flow_id, "due_ms": next_at_ms, "now_ms": now_ms},
        )

    def extend(self, event_id: str, generation: int, *, lease_ms: int, now_ms: int) -> Lease:
        """Move a live lease's end to now + lease_ms (fenced like settle)."""
        rowid, flow_id = self._fenced(event_id, generation, now_ms)[:2]
        lease_until = now_ms + lease_ms
        # Only the current holder's lease moves; the flow's due time follows it.
        self.connection.execute(
            "UPDATE event SET lease_until_ms = :lease_until_ms WHERE id = :id",
            {"id": rowid, "lease_until_ms": lease_until},
        )
        self.connection.execute(
            "UPDATE flow SET due_ms = :due_ms WHERE flow_id = :flow_id",
            {"flow_id": flow_id, "due_ms": lease_until},
        )
        row = self.connection.execute(
            "SELECT e.event_id, f.name, e.seq, e.body, e.generation, e.attempts, "
            "e.lifetime_attempts, e.owner, e.lease_until_ms "
            "FROM event AS e JOIN flow AS f ON f.flow_id = e.flow_id WHERE e.id = :id",
            {"id": rowid},
        ).fetchone()
        return Lease(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5], row[6], row[7],
                     row[8] / 1000)

    # -- redrive ---------------------------------------------------------------

    def redrive(
        self, event_id: str, *, expected_generation: int, reason: str, actor: str | None, now_ms: int
    ) -> int:
        """Give a quarantined head a new round; returns its new generation."""
        conn = self.connection
        row = conn.execute(
            "SELECT id, flow_id, state, generation, attempts, lifetime_attempts, reason "
            "FROM event WHERE event_id = :event_id",
            {"event_id": event_id},
        ).fetchone()
        if row is None:
            raise RedriveRefused(event_id, f"event {event_id!r} does not exist")
        rowid, flow_id, state, generation, attempts, lifetime, old_reason = row
        if state != "quarantined":
            raise RedriveRefused(event_id, f"event {event_id!r} is {state}, not quarantined")
        if generation != expected_generation:
            raise RedriveRefused(
                event_id,
                f"event {event_id!r} is at generation {generation}, not {expected_generation}",
            )
        new_generation = generation + 1
        # A new round: attempts reset, lifetime_attempts kept, the old reason
        # moves to the audit row. The generation moves on, so no holder from
        # before the quarantine can settle.
        conn.execute(
            "UPDATE event SET state = 'ready', generation = :generation, attempts = 0, "
            "next_at_ms = :now_ms, reason = NULL WHERE id = :id AND state = 'quarantined'",
            {"id": rowid, "generation": new_generation, "now_ms": now_ms},
        )
        # The quarantined event is its flow's head; the flow is claimable again now.
        updated = conn.execute(
            "UPDATE flow SET due_ms = :now_ms, runnable = 1 WHERE flow_id = :flow_id AND head_id = :id",
            {"flow_id": flow_id, "id": rowid, "now_ms": now_ms},
        ).rowcount
        if updated != 1:
            raise FairqError(f"event {event_id!r} is quarantined but is not its flow's head")
        self._audit(event_id, "redrive", reason, actor, new_generation, now_ms,
                    {"replaced_reason": old_reason, "attempts": attempts, "lifetime_attempts": lifetime})
        return new_generation

    # -- configuration ---------------------------------------------------------

    def set_weight(self, name: str, weight: int) -> None:
        """Set a flow's weight, creating the flow if it has never been seen."""
        # The rotation place of a new flow is set when its first event arrives.
        self.connection.execute(
            "INSERT INTO flow (name, weight, pass, turn) VALUES (:name, :weight, 0, 0) "
            "ON CONFLICT (name) DO UPDATE SET weight = excluded.weight",
            {"name": name, "weight": weight},
        )

    # -- audit -----------------------------------------------------------------

    def _audit(self, event_id: str, action: str, reason: str | None, actor: str | None,
               generation: int | None, now_ms: int, detail: dict[str, Any]) -> None:
        # Audit rows are appended, never changed.
        self.connection.execute(
            "INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail) "
            "VALUES (:event_id, :action, :reason, :actor, :generation, :at_ms, :detail)",
            {"event_id": event_id, "action": action, "reason": reason, "actor": actor,
             "generation": generation, "at_ms": now_ms,
             "detail": json.dumps(detail, sort_keys=True, separators=(",", ":"))},
        )

    # -- reads -------------------------------------------------------------------

    def get(self, event_id: str) -> EventInfo | None:
        row = self.connection.execute(
            _SELECT_EVENT + "WHERE e.event_id = :event_id",
            {"event_id": event_id},
        ).fetchone()
        return None if row is None else _event_info(row)

    def events(self, *, state: str | None, flow: str | None, limit: int) -> list[EventInfo]:
        params = {"state": state, "flow": flow, "limit": limit}
        if flow is not None:
            # One flow, in seq order, through the (flow_id, seq) index.
            sql = _SELECT_EVENT + (
                "WHERE f.name = :flow AND (:state IS NULL OR e.state = :state) ORDER BY e.seq LIMIT :limit"
            )
        elif state == "quarantined":
            # The dead-letter list, through its partial index.
            sql = _SELECT_EVENT + "WHERE e.state = 'quarantined' ORDER BY e.id LIMIT :limit"
        else:
            sql = _SELECT_EVENT + "WHERE (:state IS NULL OR e.state = :state) ORDER BY e.id LIMIT :limit"
        return [_event_info(r) for r in self.connection.execute(sql, params)]

    def audit(self, event_id: str | None, *, limit: int | None) -> list[AuditEntry]:
        rows = self.connection.execute(
            "SELECT event_id, action, reason, actor, generation, at_ms, detail FROM audit "
            "WHERE :event_id IS NULL OR event_id = :event_id ORDER BY id LIMIT coalesce(:limit, -1)",
            {"event_id": event_id, "limit": limit},
        )
        return [
            AuditEntry(r[0], r[1], r[2], r[3], r[4], r[5] / 1000, json.loads(r[6])) for r in rows
        ]

    def stats(self, now_ms: int) -> Stats:
        conn = self.connection
        counts = {s.value: 0 for s in State}
        counts.update(conn.execute("SELECT state, n FROM tally"))
        flows = conn.execute("SELECT count(*) FROM flow WHERE head_id IS NOT NULL").fetchone()[0]
        oldest = conn.execute(
            "SELECT min(f.due_ms) FROM flow AS f JOIN event AS e ON e.id = f.head_id "
            "WHERE f.due_ms <= :now_ms AND e.state = 'ready'",
            {"now_ms": now_ms},
        ).fetchone()[0]
        age = 0.0 if oldest is None else max(0, now_ms - oldest) / 1000
        return Stats(counts=counts, flows=flows, oldest_ready_age=age, now=now_ms / 1000)


_SELECT_EVENT = (
    "SELECT e.event_id, f.name, e.seq, e.body, e.state, e.generation, e.attempts, "
    "e.lifetime_attempts, e.next_at_ms, e.lease_until_ms, e.owner, e.reason, "
    "e.created_ms, e.due_ms, e.first_claim_ms, e.settled_ms "
    "FROM event AS e JOIN flow AS f ON f.flow_id = e.flow_id "
)


def _repeat(item: NewEvent, stored_flow: str | None, seq: int, stored_body: str) -> Enqueued:
    """An enqueue of a stored id: identical -> created=False, different -> Conflict."""
    if stored_flow != item.flow:
        raise Conflict(
            item.event_id, "flow",
            f"event {item.event_id!r} is already stored in flow {stored_flow!r}, not {item.flow!r}",
        )
    if stored_body != item.body:
        raise Conflict(item.event_id, "body")
    return Enqueued(item.event_id, item.flow, seq, False)


def _event_info(row: Sequence[Any]) -> EventInfo:
    return EventInfo(
        event_id=row[0], flow=row[1], seq=row[2], body=json.loads(row[3]), state=State(row[4]),
        generation=row[5], attempts=row[6], lifetime_attempts=row[7], next_at=from_ms(row[8]),
        lease_until=from_ms(row[9]), owner=row[10], reason=row[11], created_at=row[12] / 1000,
        due_at=row[13] / 1000, first_claimed_at=from_ms(row[14]), settled_at=from_ms(row[15]),
    )

