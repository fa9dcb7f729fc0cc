"""One PostgreSQL write transaction of the queue, and the shared state it keeps.

TxnCore opens the transaction (its own, or joined to an application's) and
keeps what every verb shares: the time the call runs at (the server's clock,
or the stored clock row with clock="model"), the rotation register, the
turn sequence, the counters, the audit log and the wake-up notification.
Counters and the rotation register are sharded: a transaction adds its
changes to one shard, once, just before COMMIT, so no row is locked by
every transaction. It takes a shard no other transaction holds (SKIP
LOCKED on the rotation row, which guards that shard's counter rows too), so
a stopped or slow transaction's shard is never waited for; only when every
shard is held does it wait for one. A transaction joined to an
application's (the outbox), which may stay open for long, takes no shard:
it appends its counters to rows of its own, outside the shards, which
transactions on fairq's own connections fold into theirs later. The verbs'
SQL lives beside it (claim, enqueue_one, verbs, settle, maintenance, tenants); PgTxn (store)
puts them together. Never commits by itself.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ...kernel import policy
from ...errors import InvalidInput
from ...kernel.policy import Policy, policy_from_row
from ...kernel.rows import AuditTrail
from ...types import TOTALS
from . import DUE_CHANNEL, READY_CHANNEL
from .connection import PgDatabase
from .policy_store import POLICY_COLUMNS, read_policy

#: Rows of the rotation register and of each counter (schema step 1 makes 32).
SHARDS = 32

#: One in FOLD_EVERY transactions on fairq's own connections folds up to
#: FOLD_ROWS counter rows appended by outbox transactions into its shard.
FOLD_EVERY = 16
FOLD_ROWS = 256


def fold() -> int:
    """How many outbox counter rows this transaction folds (mostly none)."""
    return FOLD_ROWS if random.randrange(FOLD_EVERY) == 0 else 0


#: The server clock in integer milliseconds (clock_timestamp: the time now,
#: not the transaction's start).
SERVER_NOW = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"

_ROTATION = "(SELECT max(vtime) FROM rotation), (SELECT max(tail) FROM rotation), "
# The server's time, read without a lock: writers on the server clock never wait for one another's time.
_SERVER_STATE = (f"SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, {_ROTATION}{POLICY_COLUMNS} "
                 "FROM policy WHERE id = 1")
# The stored clock, locked: model-clock writers take turns, as on SQLite.
_MODEL_STATE = (f"SELECT c.now_ms, {_ROTATION}{POLICY_COLUMNS} FROM queue_clock AS c JOIN policy ON policy.id = 1 "
                "WHERE c.id = 1 FOR UPDATE OF c")

# The shard of a transaction on fairq's own connection: one that no other
# transaction holds, never waited for (its rotation row guards its counters).
_FREE_SHARD = "SELECT shard FROM rotation ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED"
# A shard this transaction already holds (it waited for one: every shard was held).
_HELD_SHARD = "SELECT %(held)s::integer AS shard"
# An outbox transaction's own counter rows, below the shards, keyed by its
# transaction id: no other transaction writes them until it has committed.
_OWN_ROWS = "SELECT -1 - mod(txid_current(), 2147483647)::integer AS shard"
# Everything a transaction leaves behind, in one statement just before COMMIT
# (migrations/verbs.sql's fairq_bookkeep does the same for the one-statement verbs).
_WRITES = (
    # The stored clock moves under its row lock (model clock only).
    "clock AS (UPDATE queue_clock SET now_ms = %(now_ms)s WHERE id = 1 AND %(store_time)s), "
    # A max-register: a shard only moves forward; readers take the max of all shards.
    "rotation AS (UPDATE rotation SET vtime = greatest(rotation.vtime, %(vtime)s), "
    "tail = greatest(rotation.tail, %(tail)s) FROM taken WHERE rotation.shard = taken.shard AND %(move)s), "
    # Counter rows appended by committed outbox transactions, which only a
    # fold touches after that: taken over into the shard taken (skipping
    # those another fold has), never when no shard was taken.
    "foldable AS (SELECT name, shard FROM counter WHERE shard < 0 AND EXISTS (SELECT FROM taken) "
    "LIMIT %(fold)s FOR UPDATE SKIP LOCKED), "
    "folded AS (DELETE FROM counter USING foldable WHERE counter.name = foldable.name "
    "AND counter.shard = foldable.shard RETURNING counter.name, counter.n), "
    # Each counter's true value is the sum of its rows; one shard (or the
    # outbox's own rows) per transaction, with what it folded.
    "counters AS (INSERT INTO counter (name, shard, n) SELECT c.name, taken.shard, sum(c.n) "
    "FROM (SELECT * FROM unnest(%(names)s::text[], %(ns)s::bigint[]) UNION ALL SELECT * FROM folded) "
    "AS c(name, n) CROSS JOIN taken GROUP BY c.name, taken.shard ORDER BY c.name "
    "ON CONFLICT (name, shard) DO UPDATE SET n = counter.n + excluded.n) "
    # Sleeping workers wake, or learn of an earlier due time; delivered
    # at commit, never for a rollback. The shard taken (NULL: every one was held).
    "SELECT (SELECT shard FROM taken), (SELECT pg_notify(%(channel)s, %(ready)s) WHERE %(notify)s), "
    "(SELECT pg_notify(%(due_channel)s, %(due)s::text) WHERE %(due)s::text IS NOT NULL)"
)
_FLUSH_FREE = "WITH taken AS (" + _FREE_SHARD + "), " + _WRITES
_FLUSH_HELD = "WITH taken AS (" + _HELD_SHARD + "), " + _WRITES
_FLUSH_OUTBOX = "WITH taken AS (" + _OWN_ROWS + "), " + _WRITES

SERVER_CLOCK_MESSAGE = ("is refused on the server clock: a PostgreSQL queue runs at its database "
                        "server's time; open it with clock='model' to give explicit times")


class TxnCore(AuditTrail):
    """A write transaction (a context manager) with the queue's shared state."""

    def __init__(self, db: PgDatabase, name: str, conn: Any, *, server_clock: bool) -> None:
        self._cm = db.write(name, self._flush) if conn is None else db.join(conn, self._flush)
        self._db = db
        self._joined = conn is not None  # in the application's transaction (the outbox)
        self.server_clock = server_clock
        self.connection: Any = None
        self._clock_ms: int | None = None  # the stored clock (model) or the server time read
        self._time_dirty = False
        self._rotation: list[int] | None = None  # [vtime, tail] as read, then as moved
        self._rotation_dirty = False
        self._policy: Policy | None = None
        self._moved: Counter[str] = Counter()
        self._totals: Counter[str] = Counter()
        self._lags: Counter[int] = Counter()
        self._ready = 0  # heads this transaction makes claimable now (notified at commit)
        self._due_ms: int | None = None  # the earliest time a head this transaction left waiting is due

    def __enter__(self) -> Any:
        self.connection = self._cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._cm.__exit__(*exc)

    @property
    def joined(self) -> bool:
        """Whether this transaction is an application's (the outbox)."""
        return self._joined

    @property
    def db(self) -> PgDatabase:
        """The queue's database, which this transaction runs on."""
        return self._db

    def execute(self, sql: str, params: Any = None) -> Any:
        """Run one statement on this transaction's connection (the cursor)."""
        return self.connection.execute(sql, params)

    def run_callback(self, fn: Callable[[Any], Any], what: str) -> Any:
        """fn(conn) inside this transaction, which it must leave open (a settle effect)."""
        return self._db.run_callback(self.connection, fn, what)

    # -- time --------------------------------------------------------------------

    def _stored(self) -> int:
        if self._clock_ms is None:
            # One round trip: the time, the rotation register and the retry policy.
            row = self.execute(_SERVER_STATE if self.server_clock else _MODEL_STATE).fetchone()
            self._clock_ms = int(row[0])
            if self._rotation is None:
                self._rotation = [int(row[1]), int(row[2])]
            if self._policy is None:
                self._policy = policy_from_row(tuple(row[3:]))
        return self._clock_ms

    def now(self, requested_ms: int, explicit: bool) -> int:
        """The time this call runs at: the server's, or (model clock)
        policy.effective_now against the stored clock."""
        if self.server_clock:
            if explicit:
                raise InvalidInput("now", SERVER_CLOCK_MESSAGE)
            self._clock_ms = None
            return self._stored()
        stored = self._stored()
        now_ms = policy.effective_now(requested_ms, stored, explicit=explicit)
        if now_ms > stored:
            self._clock_ms = now_ms
            self._time_dirty = True
        return now_ms

    def stored_now(self) -> int:
        return self._stored()

    def rewind(self, to_ms: int) -> None:
        """Set the stored clock back to to_ms: only a clock reset does."""
        self._stored()
        self._clock_ms = to_ms
        self._time_dirty = True

    def leave_time_unstored(self) -> None:
        """An idle claim decided nothing that depends on its time: store nothing."""
        if not self._moved and not self._totals:
            self._time_dirty = False

    # -- the retry policy ----------------------------------------------------------

    def policy(self) -> Policy:
        """The stored retry policy, as read when this transaction set its time."""
        if self._policy is None:
            self._policy = read_policy(self.connection)
        return self._policy

    # -- rotation ------------------------------------------------------------------

    def rotation(self) -> list[int]:
        """[vtime, tail]: the highest of every shard, read without a lock."""
        if self._rotation is None:
            row = self.execute("SELECT max(vtime), max(tail) FROM rotation").fetchone()
            self._rotation = [int(row[0]), int(row[1])]
        return self._rotation

    def moved_rotation(self, vtime: int, tail: int) -> None:
        self._rotation = [vtime, tail]
        self._rotation_dirty = True

    # -- counters and wake-ups ------------------------------------------------------

    def moved(self, before: str | None, after: str, n: int = 1) -> None:
        """Record that n events moved from state `before` (None: new) to `after`."""
        if n and before != after:
            if before is not None:
                self._moved[before] -= n
            self._moved[after] += n

    def removed(self, state: str, n: int) -> None:
        if n:
            self._moved[state] -= n

    def happened(self, total: str, n: int = 1) -> None:
        if n:
            self._totals[total] += n

    def count(self, name: str, n: int) -> None:
        """Add n to a counter of retention (tombstones, purged)."""
        if n:
            self._totals[name] += n

    def claim_lag(self, lag_ms: int) -> None:
        self._lags[policy.lag_bucket(lag_ms)] += 1

    def wake(self, heads: int = 1) -> None:
        """This transaction makes `heads` heads claimable now: notify at commit,
        saying how many (a listening process wakes that many idle workers)."""
        self._ready += max(heads, 0)

    def due_later(self, times_ms: Sequence[int], now_ms: int) -> None:
        """This transaction leaves heads waiting until these times: those after
        now_ms are notified at commit (the earliest), unless wake() was called."""
        later = [t for t in times_ms if t > now_ms]
        if later:
            self._due_ms = min(later + ([self._due_ms] if self._due_ms is not None else []))

    def _flush(self) -> None:
        """Write the clock, the rotation shard, the counters and the
        notification, in one statement, just before COMMIT."""
        changes = {**{name: n for name, n in self._moved.items() if n},
                   **{f"total_{name}": n for name, n in self._totals.items() if n},
                   **{f"lag_{bucket}": n for bucket, n in self._lags.items() if n}}
        store_time = self._time_dirty and not self.server_clock
        # A wake-up makes waiters look again at the earliest time: no due notice beside it.
        due = None if self._ready or self._due_ms is None else str(self._due_ms)
        if not (store_time or self._rotation_dirty or changes or self._ready or due):
            return
        names = sorted(changes)
        vtime, tail = self._rotation if self._rotation is not None else (0, 0)
        params = {"now_ms": self._clock_ms, "store_time": store_time, "vtime": vtime, "tail": tail,
                  "move": self._rotation_dirty, "names": names, "ns": [changes[k] for k in names],
                  "fold": 0, "channel": READY_CHANNEL, "notify": self._ready > 0, "ready": str(self._ready),
                  "due_channel": DUE_CHANNEL, "due": due}
        if self._joined and not self._rotation_dirty:
            # The application's transaction may stay open for long: it holds
            # no row that another transaction's bookkeeping needs.
            self.execute(_FLUSH_OUTBOX, params)
        elif self.execute(_FLUSH_FREE, {**params, "fold": fold()}
                          ).fetchone()[0] is None:
            # Every shard is held (as many transactions committing at once,
            # or stopped ones): wait for one, then write what is left.
            held = random.randrange(SHARDS)
            self.execute("SELECT shard FROM rotation WHERE shard = %(held)s FOR UPDATE", {"held": held})
            self.execute(_FLUSH_HELD, {**params, "held": held, "store_time": False, "notify": False,
                                       "due": None})
        self._time_dirty = self._rotation_dirty = False
        self._ready = 0
        self._due_ms = None
        self._moved.clear()
        self._totals.clear()
        self._lags.clear()

    # -- shared statements ------------------------------------------------------------

    def quarantine(self, ids: Sequence[int], reasons: Sequence[str | None]) -> None:
        """Quarantine the head events `ids`, each with its reason (the caller counts them)."""
        if not ids:
            return
        # A quarantined head keeps its rotation place and keeps blocking its
        # flow, but leaves both dispatch indexes.
        self.execute(
            "UPDATE event AS e SET state = 'quarantined', lease_until_ms = NULL, next_at_ms = NULL, "
            "reason = c.reason FROM unnest(%(pks)s::bigint[], %(reasons)s::text[]) AS c(pk, reason) "
            "WHERE e.id = c.pk", {"pks": list(ids), "reasons": list(reasons)})
        # A tenanted head that was runnable is one fewer on its tenant; one
        # that was leased frees a slot (migrations/tenants.sql's fairq_tenants_touched).
        self.execute(
            "WITH old AS (SELECT event_pk, runnable, tenant_id FROM head WHERE event_pk = ANY(%(pks)s::bigint[]) "
            "ORDER BY event_pk FOR UPDATE), "
            "q AS (UPDATE head SET dispatch_ms = NULL, runnable = false FROM old WHERE head.event_pk = old.event_pk "
            "RETURNING old.runnable, old.tenant_id) "
            "SELECT fairq_tenants_touched(array_agg(q.tenant_id) FILTER (WHERE q.runnable), "
            "array_agg(-1) FILTER (WHERE q.runnable), array_agg(q.tenant_id) FILTER (WHERE NOT q.runnable)) "
            "FROM q WHERE q.tenant_id IS NOT NULL HAVING count(*) > 0", {"pks": list(ids)})

    def append_audit(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        cols = ("event_id", "action", "reason", "actor", "generation", "at_ms", "detail")
        # Audit rows are appended, never changed; in the order given.
        self.execute(
            "INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail) "
            "SELECT a.event_id, a.action, a.reason, a.actor, a.generation, a.at_ms, a.detail "
            "FROM unnest(%(event_id)s::text[], %(action)s::text[], %(reason)s::text[], "
            "%(actor)s::text[], %(generation)s::bigint[], %(at_ms)s::bigint[], %(detail)s::text[]) "
            "WITH ORDINALITY AS a(event_id, action, reason, actor, generation, at_ms, detail, i) ORDER BY i",
            {c: [r[c] for r in rows] for c in cols})


def state_counters() -> tuple[str, ...]:
    """The counter names of the event states and totals (stats reads them)."""
    return ("ready", "inflight", "acked", "quarantined", *(f"total_{t}" for t in TOTALS))
