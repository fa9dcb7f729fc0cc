"""A public call's arguments as the plain records the backend takes, and a
flow head read back as the answer why_blocked gives.

The Queue facade (fairq.api.queue) calls these before a transaction opens, so a
refusal (InvalidInput naming the field) writes nothing. Nothing here reads a
database; only requested_time reads the clock it is given.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import _validate as v
from ..stores.backend import NewEvent, Pause, SettleItem
from ..errors import InvalidInput
from ..leases import discard_command, lease_attempts, lease_key, redrive_command
from ..kernel.policy import Backoff, backoff_text, to_ms
from ..limits import MAX_ATTEMPTS
from ..types import Blocked, EventInfo, Outcome, State, TenantInfo

#: The keys an enqueue_many dict item (and a JSONL line) may have, in the order messages list them.
ITEM_KEY_ORDER = ("event_id", "body", "flow", "tenant", "delay", "kind", "max_attempts", "timeout", "backoff")
ITEM_KEYS = frozenset(ITEM_KEY_ORDER)
#: The keys of a backoff given as a dict (those missing take fairq.Backoff's defaults).
BACKOFF_KEYS = ("base", "factor", "cap", "jitter")


#: The clock= strings a Queue takes: the database server's clock, or a stored model clock.
CLOCK_MODES = ("server", "model")

SERVER_CLOCK_REFUSAL = ("is refused on the server clock: this queue runs at its database server's "
                        "time; open it with clock='model' to give explicit times")


def wall_clock(clock: Any) -> Callable[[], float]:
    """The callable a Queue reads for a call without `now`: the one given, or
    the system clock for None and the clock= strings ("server", "model")."""
    if clock is None or clock in CLOCK_MODES:
        return time.time
    if isinstance(clock, str) or not callable(clock):
        raise InvalidInput("clock", f"must be a callable, 'server' or 'model', not {clock!r}")
    return clock  # type: ignore[no-any-return]


def requested_time(clock: Callable[[], float], max_clock_skew: float | None, now: float | None,
                   field: str = "now", *, server_clock: bool = False) -> tuple[int, bool]:
    """(milliseconds, explicit?) for a call's `now` argument; an explicit
    time more than max_clock_skew ahead of the clock is refused, and any
    explicit time on a server clock."""
    if now is None:
        return to_ms(v.seconds(clock(), "clock")), False
    if server_clock:
        raise InvalidInput(field, SERVER_CLOCK_REFUSAL)
    at = v.seconds(now, field)
    if max_clock_skew is not None:
        reading = v.seconds(clock(), "clock")
        if at > reading + max_clock_skew:
            raise InvalidInput(field, f"{at!r} is {at - reading:.3f} s ahead of the clock ({reading!r}); "
                                      f"at most max_clock_skew={max_clock_skew:g} s is accepted")
    return to_ms(at), True


def call_lease_ms(value: float | None, field: str = "lease_seconds") -> int | None:
    """A call's own lease in milliseconds; None: the stored policy's, read in the call's transaction."""
    return None if value is None else to_ms(v.seconds(value, field, positive=True))


def new_event(event_id: Any, body: Any, flow: Any, delay: Any, *, max_body_bytes: int,
              tenant: Any = None, kind: Any = None, max_attempts: Any = None, timeout: Any = None,
              backoff: Any = None) -> NewEvent:
    """One enqueue's arguments, checked: the body in canonical JSON, the
    delay and the timeout in ms, the backoff as the text an event stores."""
    return NewEvent(
        v.identifier(event_id, "event_id"),
        None if flow is None else v.identifier(flow, "flow"),
        v.body(body, "body", max_bytes=max_body_bytes),
        to_ms(v.seconds(delay, "delay")),
        tenant=None if tenant is None else v.identifier(tenant, "tenant"),
        kind=None if kind is None else v.kind(kind, "kind"),
        max_attempts=None if max_attempts is None else v.count(max_attempts, "max_attempts", low=1,
                                                                high=MAX_ATTEMPTS),
        timeout_ms=None if timeout is None else to_ms(v.seconds(timeout, "timeout", positive=True)),
        backoff=None if backoff is None else event_backoff(backoff),
    )


def event_backoff(value: Any, field: str = "backoff") -> str:
    """An event's own backoff, a fairq.Backoff or a dict of its fields (base,
    factor, cap, jitter; those missing take Backoff's defaults), as the JSON
    text the event stores (policy.backoff_text)."""
    if isinstance(value, Mapping):
        unknown = sorted(str(key) for key in value if key not in BACKOFF_KEYS)
        if unknown:
            raise InvalidInput(f"{field}.{unknown[0]}", "is not a known key (base, factor, cap, jitter)")
        value = Backoff(**value)  # each field checked (InvalidInput naming backoff.<field>)
    if not isinstance(value, Backoff):
        raise InvalidInput(field, f"must be a fairq.Backoff or a dict of its fields, not {type(value).__name__}")
    return backoff_text(value)


def batch_item(item: Any, *, max_body_bytes: int) -> NewEvent:
    """One enqueue_many item: (event_id, body), (event_id, body, flow),
    (event_id, body, flow, tenant), or a dict with event_id, body and
    optionally flow, tenant, delay, kind, max_attempts, timeout and backoff."""
    if isinstance(item, tuple) and 2 <= len(item) <= 4:
        return new_event(item[0], item[1], item[2] if len(item) >= 3 else None, 0.0,
                         max_body_bytes=max_body_bytes, tenant=item[3] if len(item) == 4 else None)
    if isinstance(item, Mapping):
        unknown = set(item) - ITEM_KEYS
        if unknown:
            raise InvalidInput(sorted(map(str, unknown))[0], f"is not a known key ({', '.join(ITEM_KEY_ORDER)})")
        if "event_id" not in item or "body" not in item:
            raise InvalidInput("event_id" if "event_id" not in item else "body", "is required")
        return new_event(item["event_id"], item["body"], item.get("flow"), item.get("delay", 0.0),
                         max_body_bytes=max_body_bytes, tenant=item.get("tenant"), kind=item.get("kind"),
                         max_attempts=item.get("max_attempts"), timeout=item.get("timeout"),
                         backoff=item.get("backoff"))
    raise InvalidInput("", "must be (event_id, body), (event_id, body, flow), (event_id, body, flow, tenant) "
                           "or a dict")


def settle_item(lease: Any, outcome: Any, reason: Any, delay: Any) -> SettleItem:
    """One settle's arguments, checked: an ack or a release takes no reason or
    delay, a fail takes no delay and needs a reason."""
    event_id, generation = lease_key(lease, "lease")
    attempts = lease_attempts(lease)
    outcome = v.outcome(outcome)
    if outcome is Outcome.ACK or outcome is Outcome.RELEASE:
        if reason is not None:
            raise InvalidInput("reason", f"{outcome.value} takes no reason")
        if delay is not None:
            raise InvalidInput("delay", f"{outcome.value} takes no delay")
        return SettleItem(event_id, generation, outcome, None, None, attempts)
    if outcome is Outcome.FAIL and delay is not None:
        raise InvalidInput("delay", "a fail takes no delay")
    return SettleItem(event_id, generation, outcome,
                      v.reason(reason, "reason", required=outcome is Outcome.FAIL),
                      v.optional_seconds(delay, "delay"), attempts)


def required_reason(value: Any, field: str = "reason") -> str:
    """A reason that must be given (redrive, clock reset): printable text."""
    text = v.reason(value, field, required=True)
    assert text is not None  # required: a missing reason raised InvalidInput
    return text


def blocked(flow: str, found: tuple[int, EventInfo | None] | None, now_ms: int, path: Any,
            tenant: TenantInfo | None = None, pause: Pause | None = None) -> Blocked:
    """Why a flow is not moving, from its head as Snapshot.flow_head read it,
    its tenant as it stands at now_ms (None: the flow is its own tenant) and
    its pause (None: not paused). A pause is named first: the operator's
    decision holds whatever the head's state."""
    at = now_ms / 1000
    if found is None:
        return Blocked(flow, "unknown", at)
    next_seq, head = found
    name = None if tenant is None else tenant.name
    if pause is not None:
        paused = functools.partial(Blocked, flow, "paused", at, reason=pause.reason, actor=pause.actor,
                                   until=pause.at_ms / 1000, tenant=name)
        if head is None:
            return paused()
        return paused(event_id=head.event_id, seq=head.seq, generation=head.generation, attempts=head.attempts,
                      backlog=next_seq - head.seq)
    if head is None:
        return Blocked(flow, "empty", at, tenant=name)
    answer = functools.partial(
        Blocked, flow, now=at, event_id=head.event_id, seq=head.seq, owner=head.owner,
        reason=head.reason, generation=head.generation, attempts=head.attempts,
        backlog=next_seq - head.seq, tenant=name)
    if head.state is State.QUARANTINED:
        where = os.fsdecode(path)
        return answer("quarantined", redrive=redrive_command("--db", where, head.event_id, head.generation),
                      discard=discard_command("--db", where, head.event_id, head.generation))
    if head.state is State.INFLIGHT:
        assert head.lease_until is not None
        if head.lease_until > at:
            return answer("leased", until=head.lease_until)
    else:
        assert head.next_at is not None
        if head.next_at > at:
            return answer("backing_off" if head.attempts else "delayed", until=head.next_at)
    # Due: claimable now (an expired lease is taken over), unless its tenant is held back.
    if tenant is not None and tenant.limited_by is not None:
        return answer("tenant_cap" if tenant.limited_by == "max_inflight" else "tenant_rate", until=tenant.until)
    if head.state is State.INFLIGHT:
        return answer("expired", until=head.lease_until)
    return answer("ready")


def store_path(path: Any) -> Any:
    """The database argument: a str or path-like naming a file (or a database
    URL, which fairq.stores.sqlite.open_store routes), no NUL."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise InvalidInput("path", f"must be a str or path-like, not {type(path).__name__}")
    name = os.fspath(path)
    if not name or ("\x00" if isinstance(name, str) else b"\x00") in name:
        raise InvalidInput("path", f"must be a non-empty file name without NUL, got {name!r}")
    return path
