"""The JSON forms of fairq's values and refusals on the HTTP wire.

Both ends use this module: the server to answer, the client to rebuild the
very value types (`Lease`, `Settled`, ...) and exception classes
(`StaleLease`, `InvalidInput`, ...) a local Queue returns and raises. Times
are float seconds of the server's queue clock; an unbounded histogram bound
is the string "+Inf". A stored body the server cannot decode (an
UndecodableBody) is sent as `"body": null` beside `"undecodable_body":
{"text", "problem"}`, a key no real body can produce. No I/O and no HTTP here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from .. import _validate as v
from .. import _json, cron
from .._json import json_type
from ..errors import (
    Busy,
    Conflict,
    Corrupt,
    DiskFull,
    FairqError,
    InvalidInput,
    LeaseExpired,
    ReadOnly,
    RedriveRefused,
    ResultNotReady,
    RemoteError,
    StaleLease,
    StoreError,
    UnknownSchedule,
)
from ..types import TOTALS, Blocked, EventInfo, Lease, Misfire, State, UndecodableBody

__all__ = [
    "LeaseRef",
    "lease_ref",
    "to_json",
    "from_json",
    "check_json",
    "unencodable",
    "error_code",
    "error_json",
    "queue_error_json",
    "error_from_json",
    "STATUS",
]

T = TypeVar("T")

# Machine code -> HTTP status, for every refusal the server can answer.
STATUS = {
    "invalid_input": 400,
    "invalid_json": 400,
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "unknown_event": 404,
    "unknown_schedule": 404,
    "method_not_allowed": 405,
    "request_timeout": 408,
    "conflict": 409,
    "stale_lease": 409,
    "lease_expired": 409,
    "redrive_refused": 409,
    "result_not_ready": 409,
    "length_required": 411,
    "too_large": 413,
    "unsupported_media_type": 415,
    "internal": 500,
    "not_implemented": 501,
    "busy": 503,
    "read_only": 503,
    "disk_full": 507,
    "corrupt": 500,
    "store_error": 500,
}

# The queue's refusals, subclasses before their bases.
_CODES: tuple[tuple[type[FairqError], str], ...] = (
    (UnknownSchedule, "unknown_schedule"),
    (InvalidInput, "invalid_input"),
    (StaleLease, "stale_lease"),
    (LeaseExpired, "lease_expired"),
    (Conflict, "conflict"),
    (RedriveRefused, "redrive_refused"),
    (ResultNotReady, "result_not_ready"),
    (Busy, "busy"),
    (DiskFull, "disk_full"),
    (ReadOnly, "read_only"),
    (Corrupt, "corrupt"),
    (StoreError, "store_error"),
)
# What a store failure says on the wire: the server's own message names its
# file, which is the server's business (its log has it).
_STORE_FAILURES = {
    "disk_full": "the server's database is full (disk or size limit); nothing was written",
    "read_only": "the server's database cannot be written (read-only file, folder or filesystem); "
                 "nothing was written",
    "corrupt": "the server's database is damaged; nothing was written",
    "store_error": "the server's database failed under the call; nothing was written",
}

# Codes a client turns back into InvalidInput: the request was not
# acceptable, and nothing was written.
_INPUT_REFUSALS = frozenset({"invalid_input", "invalid_json", "length_required", "too_large",
                             "unsupported_media_type"})


# -- values ---------------------------------------------------------------------------

#: The key beside a value's field `name` that carries it when it is an UndecodableBody.
_UNDECODABLE = "undecodable_"


def to_json(value: Any) -> Any:
    """A fairq value as plain JSON values (fairq._json.to_json), except that a
    field holding an UndecodableBody is null and `undecodable_<field>` carries
    its text and problem: a real body, any JSON value, cannot look like one."""
    return _json.to_json(value, _undecodable_form)


def _undecodable_form(name: str, item: Any) -> dict[str, Any] | None:
    if not isinstance(item, UndecodableBody):
        return None
    return {name: None, _UNDECODABLE + name: {"text": item.text, "problem": item.problem}}



def _number(value: Any) -> float | None:
    return math.inf if value == "+Inf" else value


def _in_order(names: Sequence[str]) -> Callable[[dict[str, int]], dict[str, int]]:
    """A mapping put back in fairq's order of `names`, then any others (JSON
    objects arrive sorted by key)."""
    def ordered(counts: dict[str, int]) -> dict[str, int]:
        known = {name: counts[name] for name in names if name in counts}
        return {**known, **{k: n for k, n in counts.items() if k not in known}}
    return ordered


# Fields whose JSON form is not already the Python value, by field name (each
# name means one thing across the value types).
_DECODE: dict[str, Callable[[Any], Any]] = {
    "state": State,
    "counts": _in_order([s.value for s in State]),
    "totals": _in_order(TOTALS),
    "misfire": Misfire,
    "claim_lag_median": _number,
    "claim_lag_p99": _number,
    "claim_lag_buckets": lambda pairs: tuple((_number(le), n) for le, n in pairs),
    "top_flows": lambda pairs: tuple((flow, n) for flow, n in pairs),
    "head": lambda head: None if head is None else from_json(EventInfo, head),
    "blocked": lambda blocked: from_json(Blocked, blocked),
}


# Each dataclass's field names, once looked up.
_NAMES: dict[type, frozenset[str]] = {}


def from_json(cls: type[T], data: Any) -> T:
    """Rebuild a value of dataclass `cls` from its JSON form.

    Keys it does not know are ignored (a newer server may send more); a
    missing or malformed field raises RemoteError with code "bad_response".
    """
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    try:
        fields = {k: _DECODE[k](x) if k in _DECODE else x for k, x in data.items() if k in names}
        for name in names:
            undecodable = data.get(_UNDECODABLE + name)
            if undecodable is not None:
                fields[name] = UndecodableBody(str(undecodable["text"]), str(undecodable["problem"]))
        return cls(**fields)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RemoteError(200, "bad_response", f"the answer is not a {cls.__name__}: {exc}") from None


class LeaseRef(NamedTuple):
    """What settle and extend need back from a lease: its event_id and
    generation, and the attempts it was handed with when sent (a hint the store
    checks: a jittered retry's draw is made for them)."""

    event_id: Any
    generation: Any
    attempts: Any = None


_LEASE_KEYS = frozenset(f.name for f in dataclasses.fields(Lease))


def lease_ref(value: Any, field: str) -> LeaseRef:
    """The event_id and generation of a lease sent back over the wire.

    Accepts the whole lease as the server sent it, or just those two keys;
    Queue checks their values.
    """
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a lease object, not {json_type(value)}")
    unknown = set(value) - _LEASE_KEYS
    if unknown:
        raise InvalidInput(f"{field}.{sorted(unknown)[0]}", "is not a lease key")
    for key in ("event_id", "generation"):
        if key not in value:
            raise InvalidInput(f"{field}.{key}", "is required")
    return LeaseRef(value["event_id"], value["generation"], value.get("attempts"))


def check_json(value: Any, field: str) -> None:
    """Refuse, naming the place, anything that would not cross as JSON unchanged."""
    v.json_value(value, field)


def unencodable(payload: dict[str, Any]) -> InvalidInput:
    """The refusal of a payload that UTF-8 cannot encode (a lone surrogate),
    naming the field as the Queue does: a key of the payload, a key of a batch
    item (`items[2].flow`), or a whole `body`, wherever in it the surrogate is."""
    for name, value in payload.items():
        field = _surrogate_at(value, name)
        if field == "cron":
            cron.parse(value)  # the Queue's own refusal names the part of the expression
        if field is not None:
            return InvalidInput(field, "is not valid Unicode (lone surrogate)")
    return InvalidInput("request", "is not valid Unicode (lone surrogate)")


def _surrogate_at(value: Any, path: str) -> str | None:
    """Where in `value` a string UTF-8 cannot encode is (a body as a whole), or None."""
    if isinstance(value, str):
        return None if _encodes(value) else path
    if not isinstance(value, (dict, list)):
        return None
    if path == "body" or path.endswith(".body"):
        return None if _encodes(_json.canonical(value)) else path
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        inner = f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]"
        if isinstance(key, str) and not _encodes(key):
            return inner
        found = _surrogate_at(item, inner)
        if found is not None:
            return found
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- refusals ---------------------------------------------------------------------------


def error_code(exc: FairqError) -> str | None:
    """The machine code of a queue refusal, or None for an unexpected error."""
    if isinstance(exc, ResultNotReady) and exc.state is None:
        return "unknown_event"  # no such event: 404, as GET /v1/events/{event_id}
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return None


def error_json(code: str, message: str, **data: Any) -> dict[str, Any]:
    """The JSON body of a refusal: error, message, and field etc. when known."""
    return {"error": code, "message": message, **{k: x for k, x in data.items() if x is not None}}


def queue_error_json(exc: FairqError) -> dict[str, Any]:
    """The JSON body of a queue refusal, carrying what its attributes say."""
    code = error_code(exc)
    if code is None:
        raise ValueError(f"{type(exc).__name__} has no wire form")
    if isinstance(exc, InvalidInput):
        return error_json(code, exc.problem, field=exc.field)
    if code in _STORE_FAILURES:
        return error_json(code, _STORE_FAILURES[code])
    if isinstance(exc, ResultNotReady):
        state = exc.state.value if isinstance(exc.state, State) else None
        return error_json(code, str(exc), event_id=exc.event_id, state=state, reason=exc.reason)
    return error_json(code, str(exc), field=getattr(exc, "field", None),
                      event_id=getattr(exc, "event_id", None), generation=getattr(exc, "generation", None))


def error_from_json(status: int, data: Any, where: str = "the server") -> FairqError:
    """The exception a local Queue would have raised for this refusal.

    Refusals with no local equivalent (authentication, routes, internal
    errors) become RemoteError carrying the status and the code.
    """
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return RemoteError(status, "http_error", f"HTTP {status} without a fairq error body")
    code = data["error"]
    message = str(data.get("message") or code)
    # As the server sent them: a refusal about an event carries both.
    event_id: Any = data.get("event_id")
    generation: Any = data.get("generation")
    field: Any = data.get("field")
    if code == "unknown_schedule":
        return UnknownSchedule(str(data.get("field") or "name"), message)
    if code in _INPUT_REFUSALS:
        return InvalidInput(str(data.get("field") or "request"), message)
    if code in ("stale_lease", "lease_expired"):
        cls = StaleLease if code == "stale_lease" else LeaseExpired
        return cls(event_id, generation, message)
    if code == "conflict":
        return Conflict(event_id, field, message)
    if code == "redrive_refused":
        return RedriveRefused(event_id, message)
    if code == "result_not_ready" and data.get("state") in {s.value for s in State}:
        reason = data.get("reason")
        return ResultNotReady(str(event_id), State(data["state"]), reason if isinstance(reason, str) else None)
    if code == "busy":
        return Busy(message)
    if code in _STORE_FAILURES:  # `path` is the server's address: its file is its own
        store_error = next(cls for cls, c in _CODES if c == code)
        assert issubclass(store_error, StoreError)
        return store_error(where, message)
    return RemoteError(status, code, message)
