"""The endpoints: one small function per Queue verb, each exactly one Queue call.

``@serves(VERB)`` adds the endpoint of a Queue verb at the method and path
the verb table gives it (fairq.api.verbs); ``@route(METHOD, PATH)`` adds one
that serves no verb. ``{name}`` in a path captures one percent-decoded
segment. An endpoint gets the Queue and the Request and
returns (status, JSON value), (204, None) for nothing, or (status, Text)
for an answer that is not JSON. It passes the request's keys to the Queue
verb as they are: the Queue validates them and names the field it refuses,
and it picks the time (no `now` on the wire).
Nothing here knows about sockets, headers or tokens (fairq.http.server).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..metrics import CONTENT_TYPE, every_tenant, exposition
from ..api.queue import Queue
from ..api.verbs import route_of
from ..limits import MAX_BATCH, WAIT_CAP
from ..types import Settled
from .wire import lease_ref, queue_error_json, to_json

__all__ = ["Request", "Refusal", "Text", "Edge", "Route", "ROUTES", "route", "serves", "matching", "Reply", "take"]

Reply = tuple[int, Any]
Endpoint = Callable[[Queue, "Request"], Reply]


class Refusal(Exception):
    """A refusal made at the HTTP edge, answered with its machine code (see wire.STATUS)."""

    def __init__(self, code: str, message: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers or {}


@dataclass(frozen=True)
class Text:
    """An answer that is not JSON: its text, its Content-Type and any headers of its own."""

    text: str
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Edge:
    """What an endpoint may know of the server in front of it: whether it
    refuses every action (read_only), and its claims/acks sampler (None: none)."""

    read_only: bool = False
    rates: Any = None


@dataclass(frozen=True)
class Request:
    """What an endpoint sees: captured path segments, the query string, the JSON body."""

    path: dict[str, str] = field(default_factory=dict)
    query: dict[str, list[str]] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    edge: Edge = field(default_factory=Edge)

    def fields(self, *required: str, optional: Sequence[str] = ()) -> dict[str, Any]:
        """The body's keys as keyword arguments: all of `required`, any of `optional`."""
        return take(self.body, required, optional)

    def params(self, *, text: Sequence[str] = (), ints: Sequence[str] = ()) -> dict[str, Any]:
        """The query string as keyword arguments: `text` names as str, `ints` parsed."""
        out: dict[str, Any] = {}
        for name, values in self.query.items():
            if name not in text and name not in ints:
                raise InvalidInput(name, "is not a known parameter")
            if len(values) > 1:
                raise InvalidInput(name, "is given more than once")
            out[name] = _int(values[0], name) if name in ints else values[0]
        return out


def take(obj: dict[str, Any], required: Sequence[str], optional: Sequence[str], within: str = "") -> dict[str, Any]:
    """`obj` checked to hold every required key and no key outside required + optional."""
    prefix = f"{within}." if within else ""
    for name in obj:
        if name not in required and name not in optional:
            raise InvalidInput(prefix + name, "is not a known key")
    for name in required:
        if name not in obj:
            raise InvalidInput(prefix + name, "is required")
    return dict(obj)


def _seconds(text: str, name: str) -> float:
    if not re.fullmatch(r"[0-9]{1,9}(\.[0-9]{1,6})?", text):
        raise InvalidInput(name, f"must be a number of seconds >= 0, got {text!r}")
    return float(text)


def _int(text: str, name: str) -> int:
    if not re.fullmatch(r"-?[0-9]{1,18}", text):
        raise InvalidInput(name, f"must be an int, got {text!r}")
    return int(text)


def _array(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidInput(name, "must be an array")
    if len(value) > MAX_BATCH:  # the cap of one HTTP call; in-process batches have none
        raise InvalidInput(name, f"at most {MAX_BATCH} per call")
    return value


@dataclass(frozen=True)
class Route:
    """One endpoint: method, path pattern split into segments, the function,
    whether it is served without a token, whether the console uses it
    (`fairq ui` serves only those), and the verb it serves (None: none)."""

    method: str
    segments: tuple[str, ...]
    endpoint: Endpoint
    public: bool = False
    console: bool = False
    verb: str | None = None

    def match(self, segments: Sequence[str]) -> dict[str, str] | None:
        """The raw (still percent-encoded) captures if the path fits this pattern."""
        if len(segments) != len(self.segments):
            return None
        captured = {}
        for pattern, segment in zip(self.segments, segments):
            if pattern.startswith("{"):
                if not segment:
                    return None
                captured[pattern[1:-1]] = segment
            elif pattern != segment:
                return None
        return captured


ROUTES: list[Route] = []

# ROUTES indexed for lookup (rebuilt when a route is added): routes without
# captures by their whole path, the others by their number of segments, and
# each route's place in ROUTES (the earlier of two that fit a path wins).
_index: tuple[int, dict[tuple[str, ...], list[Route]], dict[int, list[Route]], dict[int, int]] = (-1, {}, {}, {})


def matching(segments: Sequence[str]) -> list[tuple[Route, dict[str, str]]]:
    """Every route whose path fits `segments`, in the order added, with its
    raw (still percent-encoded) captures."""
    global _index
    size, literal, patterned, place = _index
    if size != len(ROUTES):
        literal, patterned, place = {}, {}, {}
        for i, r in enumerate(ROUTES):
            place[id(r)] = i
            if any(s.startswith("{") for s in r.segments):
                patterned.setdefault(len(r.segments), []).append(r)
            else:
                literal.setdefault(r.segments, []).append(r)
        _index = (len(ROUTES), literal, patterned, place)
    found: list[tuple[Route, dict[str, str]]] = [(r, {}) for r in literal.get(tuple(segments), ())]
    fixed = len(found)
    for r in patterned.get(len(segments), ()):
        captured = r.match(segments)
        if captured is not None:
            found.append((r, captured))
    if fixed and len(found) > fixed:
        found.sort(key=lambda m: place[id(m[0])])
    return found


def route(method: str, path: str, *, public: bool = False, console: bool = False,
          verb: str | None = None) -> Callable[[Endpoint], Endpoint]:
    """Register the decorated function as the endpoint for METHOD PATH."""
    def add(endpoint: Endpoint) -> Endpoint:
        ROUTES.append(Route(method, tuple(path.split("/")[1:]), endpoint, public, console, verb))
        return endpoint
    return add


def serves(verb: str, *, console: bool = False) -> Callable[[Endpoint], Endpoint]:
    """Register the decorated function as the endpoint of `verb`, at its route in the verb table."""
    return route(*route_of(verb), console=console, verb=verb)


# -- endpoints -------------------------------------------------------------------------


@route("GET", "/healthz", public=True)
def healthz(q: Queue, req: Request) -> Reply:
    return 200, {"status": "ok"}


@serves("enqueue")
def enqueue(q: Queue, req: Request) -> Reply:
    done = q.enqueue(**req.fields("event_id", "body", optional=("flow", "tenant", "delay", "kind", "max_attempts",
                                                                "timeout", "backoff")))
    return (201 if done.created else 200), to_json(done)


@serves("enqueue_many")
def enqueue_many(q: Queue, req: Request) -> Reply:
    items = _array(req.fields("items")["items"], "items")
    # An array item is the (event_id, body[, flow[, tenant]]) tuple form.
    done = q.enqueue_many([tuple(item) if isinstance(item, list) else item for item in items])
    return (201 if any(e.created for e in done) else 200), {"enqueued": to_json(done)}


@serves("claim")
def claim(q: Queue, req: Request) -> Reply:
    lease = q.claim(**req.fields(optional=("owner", "lease_seconds")))
    return (204, None) if lease is None else (200, to_json(lease))


@serves("claim_many")
def claim_many(q: Queue, req: Request) -> Reply:
    args = req.fields("n", optional=("owner", "lease_seconds"))
    if isinstance(args["n"], int) and args["n"] > MAX_BATCH:
        raise InvalidInput("n", f"must be between 1 and {MAX_BATCH}, got {args['n']}")
    leases = q.claim_many(**args)
    return (200, {"leases": to_json(leases)}) if leases else (204, None)


@serves("settle")
def settle(q: Queue, req: Request) -> Reply:
    args = req.fields("lease", "outcome", optional=("reason", "delay", "result"))
    args["lease"] = lease_ref(args["lease"], "lease")
    return 200, to_json(q.settle(**args))


@serves("settle_many")
def settle_many(q: Queue, req: Request) -> Reply:
    batch = []
    for i, item in enumerate(_array(req.fields("items")["items"], "items")):
        if not isinstance(item, dict):
            raise InvalidInput(f"items[{i}]", "must be an object with lease, outcome and optionally reason, delay, "
                                             "result")
        args = take(item, ("lease", "outcome"), ("reason", "delay", "result"), within=f"items[{i}]")
        batch.append((lease_ref(args["lease"], f"items[{i}].lease"), args["outcome"], args.get("reason"),
                      args.get("delay"), args.get("result")))
    results = q.settle_many(batch)
    return 200, {"results": [to_json(r) if isinstance(r, Settled) else queue_error_json(r) for r in results]}


@serves("extend")
def extend(q: Queue, req: Request) -> Reply:
    args = req.fields("lease", optional=("seconds",))
    args["lease"] = lease_ref(args["lease"], "lease")
    return 200, to_json(q.extend(**args))


@serves("redrive", console=True)
def redrive(q: Queue, req: Request) -> Reply:
    args = req.fields("event_id", "expected_generation", "reason", optional=("actor",))
    return 200, {"event_id": args["event_id"], "generation": q.redrive(**args)}


@serves("discard", console=True)
def discard(q: Queue, req: Request) -> Reply:
    args = req.fields("event_id", "expected_generation", "reason", optional=("actor",))
    return 200, {"event_id": args["event_id"], "generation": q.discard(**args)}


@serves("pause", console=True)
def pause(q: Queue, req: Request) -> Reply:
    args = req.fields("flow", "reason", optional=("actor",))
    q.pause(**args)
    return 200, {"flow": args["flow"], "paused": True}


@serves("resume", console=True)
def resume(q: Queue, req: Request) -> Reply:
    args = req.fields("flow", optional=("reason", "actor"))
    q.resume(**args)
    return 200, {"flow": args["flow"], "paused": False}


@serves("set_weight", console=True)
def set_weight(q: Queue, req: Request) -> Reply:
    args = req.fields("flow", "weight")
    q.set_weight(**args)
    return 200, args


@serves("set_tenant", console=True)
def set_tenant(q: Queue, req: Request) -> Reply:
    args = req.fields("tenant", optional=("weight", "max_inflight", "rate", "burst", "reason", "actor"))
    return 200, to_json(q.set_tenant(**args))


@serves("get", console=True)
def get(q: Queue, req: Request) -> Reply:
    info = q.get(req.path["event_id"])
    if info is None:
        raise Refusal("unknown_event", f"no event {req.path['event_id']!r}", field="event_id")
    return 200, to_json(info)


@serves("result")
def result(q: Queue, req: Request) -> Reply:
    # Not acked: 409 result_not_ready with the state and reason; no such event: 404 unknown_event.
    event_id = req.path["event_id"]
    return 200, {"event_id": event_id, "result": q.result(event_id)}


@serves("wait")
def wait(q: Queue, req: Request) -> Reply:
    # A long poll of at most WAIT_CAP seconds (a client asks again until its own
    # timeout): done, the result; not yet, the state it is still in.
    args = req.params(text=("timeout",))
    timeout = min(_seconds(args.get("timeout", "0"), "timeout"), WAIT_CAP)
    event_id = req.path["event_id"]
    try:
        return 200, {"event_id": event_id, "done": True, "result": q.wait(event_id, timeout=timeout)}
    except TimeoutError:
        info = q.get(event_id)
        state = None if info is None else info.state.value
        return 200, {"event_id": event_id, "done": False, "state": state}


@serves("why_blocked", console=True)
def why_blocked(q: Queue, req: Request) -> Reply:
    return 200, to_json(q.why_blocked(req.path["flow"]))


@serves("stats", console=True)
def stats(q: Queue, req: Request) -> Reply:
    return 200, to_json(q.stats(**req.params(ints=("top",))))


@route("GET", "/metrics")
def metrics(q: Queue, req: Request) -> Reply:
    stats = q.stats(**req.params(ints=("top",)))
    return 200, Text(exposition(stats, every_tenant(q)), CONTENT_TYPE)


# -- schedules ---------------------------------------------------------------------------


@serves("schedules.add")
def add_schedule(q: Queue, req: Request) -> Reply:
    args = req.fields("name", optional=("every", "cron", "tz", "body", "flow", "overlap", "start", "misfire",
                                        "grace"))
    return 200, to_json(q.schedules.add(**args))


@serves("schedules.get", console=True)
def get_schedule(q: Queue, req: Request) -> Reply:
    return 200, to_json(q.schedules.get(req.path["name"]))


@serves("schedules.remove")
def remove_schedule(q: Queue, req: Request) -> Reply:
    q.schedules.remove(req.path["name"])
    return 200, {"name": req.path["name"], "removed": True}


@serves("schedules.pause", console=True)
def pause_schedule(q: Queue, req: Request) -> Reply:
    req.fields()  # no keys
    return 200, to_json(q.schedules.pause(req.path["name"]))


@serves("schedules.resume", console=True)
def resume_schedule(q: Queue, req: Request) -> Reply:
    req.fields()  # no keys
    return 200, to_json(q.schedules.resume(req.path["name"]))


@serves("tick")
def tick(q: Queue, req: Request) -> Reply:
    done = q.tick(**req.fields(optional=("ahead",)))
    return (201 if any(e.created for e in done) else 200), {"enqueued": to_json(done)}
