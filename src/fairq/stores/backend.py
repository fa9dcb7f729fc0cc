"""What a store must do: the interface between the Queue facade and a database.

The facade (fairq.api.queue) validates input, picks the time a call asks for and
runs one write transaction per verb through these protocols; it never sees
SQL and never names a database. A store (fairq.stores.sqlite's SQLite one,
fairq.stores.postgres's) implements them with set-based SQL and asks fairq.kernel
for every decision, so each store keeps the same contract without copying it.
What one store can do and another cannot is a capability named here
(Store.wakeups, Store.reconnect, InboxStore), never a check of the store's kind. Everything passed across is plain data: the records below, ints in
milliseconds, and the value types of fairq.types.

Only fairq.stores (open_store, open_inbox) picks a store; nothing else names one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from ..errors import LeaseLost, RedriveRefused
from ..kernel.policy import Policy
from ..kernel.records import Advance, FlowHead, NewEvent, NewSchedule, Pause, SettleItem, StoredResult
from ..types import (AuditEntry, ClockReset, Enqueued, EventInfo, Lease, Receipt, Schedule, Settled,
                    Stats, TenantInfo)

__all__ = ["NewEvent", "SettleItem", "NewSchedule", "Advance", "FlowHead", "Pause", "AppConnection", "ScheduleStatements", "Snapshot", "WriteTxn", "Wakeups",
           "ResultWaits", "Store", "InboxStore", "StoredResult"]

T = TypeVar("T")

#: An application's own connection to the store's database (a sqlite3.Connection
#: for an SQLite file, a psycopg.Connection for PostgreSQL): an effect runs on
#: it, and an outbox enqueue joins it.
AppConnection = Any


class ScheduleStatements(Protocol):
    """The schedule rows, inside a write transaction or a read snapshot."""

    def get(self, name: str) -> Schedule | None: ...
    def insert(self, new: NewSchedule) -> Schedule: ...
    def delete(self, name: str) -> bool: ...
    def set_paused(self, name: str, paused: bool) -> Schedule | None: ...
    def due(self, horizon_ms: int) -> list[Schedule]: ...
    def advance(self, moves: Sequence[Advance]) -> None: ...
    def misfires(self, name: str, *, limit: int) -> list[AuditEntry]:
        """The misfire audit rows of the schedule's newest `limit` misfired slots, newest slot first."""

    def list(self) -> list[Schedule]: ...  # last: the name would shadow the type above


class Snapshot(Protocol):
    """The reads, all from one consistent snapshot; never writes."""

    def get(self, event_id: str) -> EventInfo | None: ...

    def result(self, event_id: str) -> StoredResult | None:
        """The event's state and reason, and its stored result (None: no such event)."""

    def events(self, *, state: str | None, flow: str | None, limit: int,
               after: str | None = None, kind: str | None = None) -> list[EventInfo]:
        """Up to `limit` events in listing order (a flow's: by seq; else by
        enqueue order), of one kind when given, those after the event
        `after` when given (keyset paging); InvalidInput naming "after" if
        no event has that id."""
    def audit(self, event_id: str | None, *, after: int, limit: int | None) -> list[AuditEntry]:
        """Up to `limit` audit rows (None: all), oldest first, those whose id is above `after`."""
    def stats(self, now_ms: int, *, top: int) -> Stats: ...
    def policy(self) -> Policy: ...

    def flow_head(self, name: str) -> tuple[int, EventInfo | None] | None:
        """(the seq the flow's next event gets, its head or None when all is
        acked); None for a flow never seen."""

    def flow_pause(self, flow: str) -> Pause | None:
        """The named flow's pause while it is paused (None: not paused, or no such flow)."""

    def flow_tenant(self, flow: str) -> str | None:
        """The tenant a named flow belongs to (None: none, or no such flow)."""

    def tenant(self, name: str, now_ms: int) -> TenantInfo | None:
        """One tenant as it stands at now_ms (None: no such tenant)."""

    def tenants(self, *, after: str | None, limit: int, now_ms: int) -> list[TenantInfo]:
        """Tenants by name after `after`, each as it stands at now_ms."""

    def flows(self, *, after: str | None, limit: int) -> list[FlowHead]:
        """Up to `limit` named flows by name, those after `after` when given (keyset paging)."""

    def schedules(self) -> ScheduleStatements: ...


class WriteTxn(Protocol):
    """One write transaction, one method per verb (the verb's transaction is
    open while the object is used inside ``with store.transaction(...)``).

    now() is called first and fixes the time the call runs at; verbs take it
    as now_ms. The store writes its clock and counters once, just before the
    transaction commits. Every method raises before it writes when it refuses.
    """

    def now(self, requested_ms: int, explicit: bool) -> int:
        """The time this call runs at (fairq.kernel.policy.effective_now against the
        stored clock); raises ClockError for an explicit time before it."""

    def stored_now(self) -> int: ...

    def policy(self) -> Policy:
        """The stored retry policy as this transaction sees it (another
        process may have changed it since this one last looked)."""

    def set_policy(self, new: Policy, *, reason: str | None, actor: str | None, now_ms: int) -> Policy:
        """Store `new` as the next policy version with one audit row; returns
        what is stored. No write when it equals the stored policy."""

    def enqueue_many(self, items: Sequence[NewEvent], now_ms: int) -> list[Enqueued]:
        """Store new events at the ends of their flows; identical repeats
        collapse (created=False); any Conflict raises before anything is written."""

    def claim_many(self, n: int, *, owner: str | None, now_ms: int, lease_ms: int | None) -> list[Lease]:
        """Lease up to n heads, one per flow, in rotation order, judged by the
        stored policy; lease_ms None: the stored policy's lease."""

    def check_fence(self, event_id: str, generation: int, now_ms: int) -> None:
        """Raise StaleLease or LeaseExpired unless this lease may settle now."""

    def run_callback(self, fn: Callable[[AppConnection], Any], what: str) -> Any:
        """fn(connection) inside this transaction, which it must leave open."""

    def settle_many(self, items: Sequence[SettleItem], *, now_ms: int) -> list[Settled | LeaseLost]:
        """Settle each lease on its own, judged by the stored policy; a lost
        lease is returned in its slot."""

    def extend(self, event_id: str, generation: int, *, lease_ms: int | None, now_ms: int) -> Lease:
        """Move a live lease's end to now + lease_ms (None: the stored policy's lease)."""

    def store_results(self, items: Sequence[tuple[str, str]], *, now_ms: int) -> None:
        """Store (event_id, canonical JSON) as the result of each event this
        transaction has just acked (an event not acked gets none). A store
        whose plain settle runs as one statement (PostgreSQL) runs a settle
        in the transaction "settle_result" inside it, so both commit together.
        """

    def redrive_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Give each quarantined head (event_id, expected_generation) a new
        round: its new generation, or its RedriveRefused (nothing written), in
        its slot. Every row named is locked before the first is judged, in the
        store's one lock order, whatever the order of the items."""

    def discard_many(self, items: Sequence[tuple[str, int]], *, reason: str, actor: str | None,
                     now_ms: int) -> list[int | RedriveRefused]:
        """Discard each (event_id, expected_generation) that is ready (due or
        waiting) or quarantined: its new generation, or its RedriveRefused
        (nothing written for it), in its slot; one 'discard' audit row each.
        A discarded head lets the next event of its flow become the head."""

    def set_paused(self, flow: str, paused: bool, *, reason: str | None, actor: str | None, now_ms: int) -> bool:
        """Pause or resume a named flow (creating its row if never seen), with
        one 'pause' / 'resume' audit row; False (nothing written) when it
        already was so."""

    def set_weight(self, name: str, weight: int) -> None: ...

    def set_tenant(self, name: str, *, weight: int | None, max_inflight: int | None, rate: int | None,
                   burst: int | None, reason: str | None, actor: str | None, now_ms: int) -> TenantInfo:
        """Store a tenant's settings (None: as stored; a new tenant starts at
        weight 1 and no limits; a rate without a burst gets burst = rate),
        with one 'set_tenant' audit row; the tenant as stored."""

    def reset_clock(self, to_ms: int, *, reason: str, actor: str | None) -> ClockReset:
        """Move the stored clock back to to_ms, with every lease end and ready time beyond it."""

    def purge_acked(self, after_id: int, *, chunk: int, acked_before_ms: int) -> tuple[int, int | None]:
        """Tombstone old acked events among the next `chunk` rows after `after_id`:
        (events purged, the last row id read, None past the end)."""

    def drop_tombstones(self, acked_before_ms: int, *, limit: int) -> int: ...

    def append_misfires(self, misfires: Sequence[tuple[str, str, dict[str, Any]]], now_ms: int) -> None:
        """Audit schedule slots that did not become instances: (instance id, reason, detail)."""

    def schedules(self) -> ScheduleStatements: ...


class Wakeups(Protocol):
    """News of work from a store that tells of it: one listening connection
    of a Queue's own, opened by Store.wakeups and closed by the Queue."""

    def wait(self, timeout: float, stop: threading.Event | None, until: Callable[[int], float]) -> bool:
        """Sleep up to `timeout` seconds, less on news of claimable work or once
        `stop` is set; until(ms): seconds from now until a due time heard (ms of
        the queue's clock). True when the whole wait was spent listening."""

    def earliest_ready_ms(self) -> int | None:
        """When the next waiting head becomes claimable (ms of the queue's clock), None if none waits."""

    def close(self) -> None: ...


class ResultWaits(Protocol):
    """News of events that ended (acked, quarantined, discarded), from a store
    that tells of them: one listening connection of a Queue's own."""

    def register(self, event_id: str) -> object | None:
        """Ask to hear of the event; a token for wait() and unregister(), or None
        when nobody listens now (the caller polls). Then look at the event
        with Store.settled_look(event_id), which sees every settle that did not
        hear of the registration."""

    def wait(self, token: object, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, less once the event was heard of; True if it was."""

    def unregister(self, token: object) -> None: ...

    def close(self) -> None: ...


class Store(Protocol):
    """An open queue database: hands out write transactions and read snapshots."""

    version: int  # the schema version found or made at open

    @property
    def parallel_calls(self) -> int:
        """Calls that threads sharing the store can have running at once
        (PostgreSQL: its pool of connections; SQLite: 1, one writer at a time)."""

    def close(self) -> None: ...

    def transaction(self, name: str, conn: AppConnection | None = None) -> AbstractContextManager[WriteTxn]:
        """A write transaction; `name` labels its crash points. With `conn` (an
        application's connection inside its own open transaction) the writes
        join that transaction and commit with it, never before."""

    def read(self, fn: Callable[[Snapshot], T]) -> T:
        """fn(snapshot) on one consistent read snapshot."""

    def wakeups(self) -> Wakeups | None:
        """A new listener for news of work (the caller closes it), or None for a
        store that does not tell of work: its workers sleep and poll."""

    def reconnect(self) -> None:
        """A new connection in place of the store's own, now (after Unavailable);
        nothing for a store without a connection to lose."""

    def result_waits(self) -> ResultWaits | None:
        """A new listener for events that end (the caller closes it), or None
        for a store that does not tell of them: a wait polls."""

    def settled_look(self, event_id: str) -> StoredResult | None:
        """The event's state and result, after any settle of it that has begun
        has committed (PostgreSQL: a locking read; SQLite: a plain read)."""


class InboxStore(Protocol):
    """The receipts of an Inbox (fairq.stores.open_inbox): one transaction per delivery."""

    def receive(self, event_id: str, flow: str | None, seq: int, body: str,
                apply: Callable[[AppConnection], Any] | None, now_ms: int) -> Receipt:
        """Judge a validated delivery (fairq.kernel.rules.delivery_verdict); for
        a new one next in its flow run apply(conn) and write the receipt, in
        one transaction."""

    def count(self, flow: str | None) -> int: ...
    def last_seq(self, flow: str) -> int: ...
    def close(self) -> None: ...
