"""One SQLite write transaction of the queue, and the state row it keeps.

TxnCore opens the transaction (its own, or joined to an application's) and
keeps what every verb shares: the queue's state row (table queue_state:
the stored clock, rotation counters, counts by state, totals), read once
when the call's time is set and written once just before COMMIT with the new time, the rotation
counters and the state transitions the call made; the audit log; the
quarantine statement. The verbs' SQL lives beside it (store.enqueue,
store.claim, store.settle) and SqliteTxn (store.queue) puts them together.
Never commits by itself, never reads a wall clock.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...kernel import policy
from ...kernel.policy import Policy, policy_from_row
from ...kernel.rows import AuditTrail
from ...types import TOTALS
from .connection import Database
from .transactions import JoinedTransaction, Transaction

log = logging.getLogger("fairq")

_Txn = TypeVar("_Txn", bound="TxnCore")

# A system clock reading clamped by more than this is worth a warning (once
# per stored clock value in a process): the stored clock was set ahead.
_AHEAD_WARNING_MS = round(policy.DEFAULT_MAX_CLOCK_SKEW * 1000)
_ahead_warned: list[int | None] = [None]


@dataclass(slots=True)
class StateRow:
    """The queue_state row as a transaction holds it: the stored time and the
    rotation state (the counts and totals are only ever added to, by _flush)."""

    now_ms: int
    vtime: int
    tail: int
    turn: int
    claim_lag: str  # JSON array of bucket counts, parsed only when a first claim adds to it
    waiting_ms: int | None  # the earliest dispatch time in the waiting index (None: it is empty)
    # Read with a claim's state row only (None: not read): the earliest end of
    # a tenant's hold (0: no tenant is held), whether a tenant is claimable
    # (a runnable head, not held), and whether the queue has any tenant.
    held_ms: int | None = None
    tenant_ready: bool | None = None
    any_tenant: bool | None = None


# Both one-row tables, with the waiting index's first entry (TxnCore.state_row).
_STATE_ROW = (
    "SELECT s.now_ms, s.vtime, s.tail, s.turn, s.claim_lag, "
    "(SELECT min(dispatch_ms) FROM event WHERE runnable = 0 AND dispatch_ms IS NOT NULL), "
    "p.max_attempts, p.lease_ms, "
    "p.backoff_base_s, p.backoff_factor, p.backoff_cap_s, p.backoff_jitter, p.version "
    "FROM queue_state AS s JOIN policy AS p ON p.id = 1 WHERE s.id = 1"
)

# The state row with the rotation index's first head (of no tenant), in the
# columns (and order) of a claim's page (store.claim): a claim's state row
# brings it along, so a claim of one head that promotes nothing reads no page
# of its own. The head is found by one step into the rotation index, then by
# id. The tenant level's three facts (StateRow.held_ms, tenant_ready,
# any_tenant) are one index step each (a queue without tenants takes only
# the last, once): with no tenant claimable, a claim never looks at tenants
# again.
_STATE_ROW_AND_HEAD = (
    "SELECT s.now_ms, s.vtime, s.tail, s.turn, s.claim_lag, "
    "(SELECT min(dispatch_ms) FROM event WHERE runnable = 0 AND dispatch_ms IS NOT NULL), "
    "p.max_attempts, p.lease_ms, "
    "p.backoff_base_s, p.backoff_factor, p.backoff_cap_s, p.backoff_jitter, p.version, "
    "CASE WHEN (SELECT max(tenant_id) FROM tenant) IS NULL THEN 0 "
    "ELSE (SELECT coalesce(min(held_until_ms), 0) FROM tenant WHERE held_until_ms > 0) END, "
    "CASE WHEN (SELECT max(tenant_id) FROM tenant) IS NULL THEN 0 "
    "ELSE (SELECT min(pass) FROM tenant INDEXED BY tenant_rotation WHERE runnable > 0 AND held_until_ms = 0) "
    "IS NOT NULL END, "
    "(SELECT max(tenant_id) FROM tenant) IS NOT NULL, "
    "h.id, h.event_id, f.name, f.weight, h.seq, h.body, h.pass, h.state, "
    "h.generation, h.attempts, h.lifetime_attempts, h.lease_until_ms, h.owner, h.due_ms, h.first_claim_ms, "
    "h.kind, h.max_attempts, h.timeout_ms, h.turn "
    "FROM queue_state AS s JOIN policy AS p ON p.id = 1 "
    "LEFT JOIN event AS h ON h.id = (SELECT e.id FROM event AS e INDEXED BY event_rotation "
    "WHERE e.runnable = 1 AND e.tenant_id IS NULL ORDER BY e.pass, e.turn LIMIT 1) "
    "LEFT JOIN flow AS f ON f.flow_id = h.flow_id WHERE s.id = 1"
)

# An enqueue's state row: the clock and the rotation counters alone (an
# enqueue needs neither the policy nor the waiting index); the rest of
# _STATE_ROW is read by _STATE_REST if the transaction asks for it.
_CLOCK_ROW = "SELECT now_ms, vtime, tail, turn, claim_lag FROM queue_state WHERE id = 1"
_STATE_REST = (
    "SELECT (SELECT min(dispatch_ms) FROM event WHERE runnable = 0 AND dispatch_ms IS NOT NULL), "
    "p.max_attempts, p.lease_ms, "
    "p.backoff_base_s, p.backoff_factor, p.backoff_cap_s, p.backoff_jitter, p.version "
    "FROM policy AS p WHERE p.id = 1"
)

# The clock, rotation counters and totals only move forward (CHECK keeps
# tail >= vtime); the state counts follow the transitions made. Positional
# parameters (in the order of the SET list): binding 16 named ones cost
# ~6 us a call, three times per enqueue-claim-ack cycle.
_WRITE_STATE_ROW = (
    "UPDATE queue_state SET now_ms = ?, vtime = ?, tail = ?, turn = ?, "
    "ready_n = ready_n + ?, inflight_n = inflight_n + ?, "
    "acked_n = acked_n + ?, quarantined_n = quarantined_n + ?, discarded_n = discarded_n + ?, "
    "enqueued_total = enqueued_total + ?, claimed_total = claimed_total + ?, "
    "expired_total = expired_total + ?, acked_total = acked_total + ?, "
    "retried_total = retried_total + ?, quarantined_total = quarantined_total + ?, "
    "redriven_total = redriven_total + ?, discarded_total = discarded_total + ?, "
    "claim_lag = coalesce(?, claim_lag) WHERE id = 1"
)

# Where each state's count and each TOTALS counter sits in a transaction's
# list of changes, in the order of _WRITE_STATE_ROW's parameters.
_STATE_SLOT = {"ready": 0, "inflight": 1, "acked": 2, "quarantined": 3, "discarded": 4}
_TOTAL_SLOT = {name: 5 + i for i, name in enumerate(TOTALS)}
_NO_CHANGES = [0] * (len(_STATE_SLOT) + len(_TOTAL_SLOT))
assert TOTALS == ("enqueued", "claimed", "expired", "acked", "retried", "quarantined", "redriven", "discarded")


class TxnCore(AuditTrail):
    """A write transaction (a context manager) with the queue's state row and counters."""

    __slots__ = ("_transaction", "_db", "connection", "cursor", "_row", "_read", "_policy_row", "_policy",
                 "_changes", "_counted", "_lags", "_dirty", "_head")

    def __init__(self, db: Database, name: str, conn: sqlite3.Connection | None = None) -> None:
        self._transaction: Transaction | JoinedTransaction = (
            db.write(name, before_commit=self._flush) if conn is None
            else db.join(conn, before_commit=self._flush)
        )
        self._db = db
        self.connection: sqlite3.Connection = db.conn
        # For statements whose rows are read at once: the connection's own
        # cursor (an application's connection gets one of its own in __enter__).
        self.cursor: sqlite3.Cursor = db.cursor
        self._row: StateRow | None = None
        # The state row's statement: with the first head for a claim, the clock
        # alone for an enqueue (_STATE_REST reads the rest if asked for).
        self._read = _STATE_ROW_AND_HEAD if name == "claim" else _CLOCK_ROW if name == "enqueue" else _STATE_ROW
        self._policy_row: tuple[Any, ...] | None = None  # read with the state row (None: not yet)
        self._policy: Policy | None = None
        # Change in each state's event count, then how many more of each TOTALS
        # happened (positions: _STATE_SLOT, _TOTAL_SLOT).
        self._changes = _NO_CHANGES.copy()
        self._counted = False  # whether any count or total changed
        self._lags: list[int] | None = None  # claim lag bucket counts, once a first claim changes them
        self._dirty = False
        # A claim's state row brings the rotation's first head ([] when the
        # rotation index was empty; None: not read, or handed out already).
        self._head: list[tuple[Any, ...]] | None = None

    def __enter__(self: _Txn) -> _Txn:
        conn = self.connection = self._transaction.__enter__()
        if conn is not self._db.conn:
            self.cursor = conn.cursor()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._transaction.__exit__(*exc)
        finally:
            # The transaction held this one's _flush: without the link the pair is
            # freed at once, not left to the garbage collector (a collection
            # every few dozen calls).
            self._transaction.before_commit = None

    def run_callback(self, fn: Callable[[sqlite3.Connection], Any], what: str) -> Any:
        """fn(conn) inside this transaction, which it must leave open (a settle effect)."""
        return self._db.run_callback(self.connection, fn, what)

    # -- the state row -------------------------------------------------------

    def state_row(self) -> StateRow:
        """The queue_state row, read once per transaction (written back by _flush),
        with the stored retry policy and the earliest waiting dispatch time
        in the same statement."""
        row = self._row
        if row is None:
            # Both one-row tables, read under this transaction's lock: a verb
            # judges by the policy stored now, whichever process set it. The
            # waiting index's first entry (one seek) tells a claim whether any
            # head came due, so it promotes only when one did.
            sql = self._read
            read = self.cursor.execute(sql).fetchone()
            if sql is _CLOCK_ROW:
                row = self._row = StateRow(read[0], read[1], read[2], read[3], read[4], None)
                return row
            row = self._row = StateRow(read[0], read[1], read[2], read[3], read[4], read[5])
            self._policy_row = read[6:13]
            if sql is _STATE_ROW_AND_HEAD:
                row.held_ms, row.tenant_ready, row.any_tenant = read[13], bool(read[14]), bool(read[15])
                self._head = [] if read[16] is None else [read[16:]]
        return row

    def _read_rest(self) -> tuple[Any, ...]:
        """The policy row, after a state row read without it (an enqueue's),
        and the waiting index's first entry."""
        row = self._row or self.state_row()
        if self._policy_row is None:
            rest = self.cursor.execute(_STATE_REST).fetchone()
            row.waiting_ms = rest[0]
            self._policy_row = rest[1:]
        return self._policy_row

    def first_head(self) -> list[tuple[Any, ...]] | None:
        """The rotation index's first head as the state row read it (a claim's
        page of one; [] if the index was empty), once: None when it was not
        read, or was handed out already."""
        head, self._head = self._head, None
        return head

    def policy(self) -> Policy:
        """The stored retry policy, as this transaction sees it (built when first asked)."""
        found = self._policy
        if found is None:
            found = self._policy = policy_from_row(self._policy_row or self._read_rest())  # cached by row
        return found

    def now(self, requested_ms: int, explicit: bool) -> int:
        """The time this call runs at; raises ClockError for an explicit time
        before the stored clock, clamps a wall clock that stepped back."""
        clock = self._row or self.state_row()
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

    def heads_may_be_due(self, now_ms: int) -> bool:
        """Whether a head in the waiting index may have come due by now_ms: the
        index's earliest entry, read with the state row, has; or this
        transaction already moved events (their new dispatch times are not in
        that reading)."""
        if self._policy_row is None:
            self._read_rest()
        waiting_ms = (self._row or self.state_row()).waiting_ms
        return self._counted or (waiting_ms is not None and waiting_ms <= now_ms)

    def stored_now(self) -> int:
        """The stored clock (ms) as this transaction found it, or as it set it."""
        return self.state_row().now_ms

    def rewind(self, to_ms: int) -> None:
        """Set the stored clock back to to_ms: only a clock reset does (store.clock)."""
        self.state_row().now_ms = to_ms
        self._dirty = True

    def next_turn(self) -> int:
        """The next arrival number: it breaks ties between equal passes."""
        clock = self._row or self.state_row()
        clock.turn += 1
        self._dirty = True
        return clock.turn

    def moved(self, before: str | None, after: str, n: int = 1) -> None:
        """Record that n events moved from state `before` (None: new) to `after`."""
        if n and before != after:
            changes = self._changes
            if before is not None:
                changes[_STATE_SLOT[before]] -= n
            changes[_STATE_SLOT[after]] += n
            self._dirty = self._counted = True

    def removed(self, state: str, n: int) -> None:
        """Record that n events in `state` left the event table (purge)."""
        self._changes[_STATE_SLOT[state]] -= n
        self._dirty = self._counted = True

    def happened(self, total: str, n: int = 1) -> None:
        """Add n to one of the TOTALS counters."""
        if n:
            self._changes[_TOTAL_SLOT[total]] += n
            self._dirty = self._counted = True

    def claim_lag(self, lag_ms: int) -> None:
        """Add an event's first-claim lag to the histogram."""
        if self._lags is None:
            self._lags = _lag_counts(self.state_row().claim_lag)
        self._lags[policy.lag_bucket(lag_ms)] += 1
        self._dirty = True

    def leave_time_unstored(self) -> None:
        """An idle claim decided nothing that depends on its time: it need not
        store it, so polling an idle queue writes (and syncs) nothing."""
        if not self._counted:
            self._dirty = False

    def _flush(self) -> None:
        """Write the state row once, before COMMIT, if this call changed it."""
        if not self._dirty:
            return
        clock = self._row or self.state_row()
        # The state row's new values (_WRITE_STATE_ROW says what each keeps).
        self.cursor.execute(
            _WRITE_STATE_ROW,
            (clock.now_ms, clock.vtime, clock.tail, clock.turn, *self._changes,
             None if self._lags is None else _lag_text(self._lags)),
        )
        self._dirty = False

    # -- shared statements -----------------------------------------------------

    def quarantine(self, ids: Sequence[int], reasons: Sequence[str | None]) -> None:
        """Quarantine the head events `ids`, each with its reason (the caller counts them)."""
        # A quarantined head keeps its rotation place and keeps blocking its
        # flow, but leaves both dispatch indexes.
        self.connection.executemany(
            "UPDATE event SET state = 'quarantined', lease_until_ms = NULL, next_at_ms = NULL, "
            "dispatch_ms = NULL, runnable = 0, reason = :reason WHERE id = :id",
            [{"id": i, "reason": reason} for i, reason in zip(ids, reasons)],
        )

    def append_audit(self, rows: list[dict[str, Any]]) -> None:
        """Append audit rows made by audit_row."""
        # Audit rows are appended, never changed.
        self.connection.executemany(
            "INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail) "
            "VALUES (:event_id, :action, :reason, :actor, :generation, :at_ms, :detail)",
            rows,
        )


# The claim-lag histogram this process last read or wrote, as stored text and
# parsed: a process that claims over and over parses the text it wrote itself
# no more (the counts are a function of the text, whichever file it is from).
_last_lags: list[tuple[str, list[int]]] = [("", [])]


def _lag_counts(text: str) -> list[int]:
    """The stored histogram's bucket counts (a copy the caller may change)."""
    last_text, counts = _last_lags[0]
    if text != last_text:
        counts = policy.lag_counts(text)
        _last_lags[0] = (text, counts)
    return counts.copy()


# The histogram's text, one %d per bucket (lag_counts gives at least every one).
_LAG_BUCKETS = policy.CLAIM_LAG_BUCKETS
_LAG_FORMAT = "[" + ",".join(["%d"] * _LAG_BUCKETS) + "]"


def _lag_text(counts: list[int]) -> str:
    """The histogram as stored: a JSON array of ints."""
    text = (_LAG_FORMAT % tuple(counts) if len(counts) == _LAG_BUCKETS
            else "[" + ",".join(map(str, counts)) + "]")
    _last_lags[0] = (text, counts.copy())
    return text

