"""fairq.Client: the Queue's verbs on a queue served by `fairq serve`.

Same verbs and signatures as Queue, `schedules` and `tick` included (minus
`now=`, `effect=` and `conn=`, which cannot cross the wire: the server uses
its own clock, no code runs inside a remote transaction, and a remote
enqueue cannot join the application's local one), the same value types back
and the same exceptions raised, so code written against Queue (fairq.Worker
among it) runs unchanged against a server.
Standard library only (http.client): each thread keeps one HTTP/1.1
connection open and sends its calls on it (fairq.http.keepalive); proxies
and redirects are not followed, so the token goes only to the URL given.

There are no automatic retries. A kept connection the server closed while it
sat idle is replaced before the request is sent; once a request may have
left, it is never sent again. A call that raises Unavailable may or may not
have taken effect: a claim may have leased an event (it is claimed again when
that lease ends); a settle may have committed (settling again answers
StaleLease).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from .. import _validate as v
from ..errors import InvalidInput, LeaseLost, RedriveRefused, RemoteError, ResultNotReady
from ..leases import discard_command, redrive_command
from ..api.queue import Queue
from ..kernel.policy import Backoff
from ..limits import MAX_AUDIT_LISTED, MAX_BATCH, MAX_EVENTS_LISTED, MAX_FLOWS_LISTED, WAIT_CAP
from ..types import (
    AuditEntry,
    Blocked,
    Enqueued,
    EventInfo,
    FlowInfo,
    Lease,
    Outcome,
    Settled,
    State,
    Stats,
    TenantInfo,
)
from .paths import query
from .remote_schedules import RemoteSchedules
from .transport import Transport
from .client_wire import server_side, settle_result, wire_backoff, wire_item, wire_lease, wire_settle_item
from .wire import error_from_json, from_json

__all__ = ["Client"]


class Client:
    """A Queue served over HTTP by `fairq serve` at `url` (default: $FAIRQ_URL).

    token: the server's bearer token (default: $FAIRQ_TOKEN). timeout: seconds to wait for each
    answer. lease_seconds: the lease a claim or extend asks for when the
    call gives none, as Queue(lease_seconds=) does (the server's own default
    applies only to requests without one). Safe to share between threads:
    each thread keeps its own connection open (close() closes them).
    Refusals raise what Queue raises (StaleLease, LeaseExpired, Conflict,
    InvalidInput naming the server's field, RedriveRefused, Busy, ...); a
    server that cannot be reached raises Unavailable; a refusal with no local
    equivalent (a wrong token, an internal error) raises RemoteError.
    """

    def __init__(self, url: str | None = None, *, token: str | None = None, timeout: float = 30.0,
                 lease_seconds: float = 30.0) -> None:
        if url is None:
            url = os.environ.get("FAIRQ_URL") or None
            if url is None:
                raise InvalidInput("url", "is required: pass fairq.Client(url) or set FAIRQ_URL")
        if token is None:
            token = os.environ.get("FAIRQ_TOKEN", "").strip() or None
        split = urlsplit(url) if isinstance(url, str) else None
        if split is None or split.scheme not in ("http", "https") or not split.hostname:
            raise InvalidInput("url", f"must be an http:// or https:// URL, got {url!r}")
        try:
            port = split.port
        except ValueError:
            raise InvalidInput("url", f"has a port that is not a number from 0 to 65535: {url!r}") from None
        if token is not None and not isinstance(token, str):
            raise InvalidInput("token", f"must be a str, not {type(token).__name__}")
        if token is not None and not (token and all("!" <= ch <= "~" for ch in token)):
            raise InvalidInput("token", "must be non-empty printable ASCII without spaces, as the server's is")
        # The routes carry /v1 themselves: a URL copied with it (http://host:port/v1) names the same server.
        prefix = split.path.rstrip("/")
        prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix
        self.url = url.rstrip("/")
        self.url = self.url[: -len("/v1")] if self.url.endswith("/v1") else self.url
        self.timeout = v.seconds(timeout, "timeout", positive=True)
        self.lease_seconds = v.seconds(lease_seconds, "lease_seconds", positive=True)
        self._http = Transport(self.url, scheme=split.scheme, host=split.hostname,
                               port=port or (443 if split.scheme == "https" else 80),
                               prefix=prefix, token=token, timeout=self.timeout)

    def __repr__(self) -> str:
        return f"fairq.Client({self.url!r})"

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that open this server again:
        ``fairq.Client(c.url, **c.settings())`` (e.g. in a worker process)."""
        return {"token": self._http.token, "timeout": self.timeout, "lease_seconds": self.lease_seconds}

    def close(self) -> None:
        """Close the connections kept open; a later call opens a new one."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- enqueue -------------------------------------------------------------------

    def enqueue(self, event_id: str, body: Any, *, flow: str | None = None, tenant: str | None = None,
                delay: float = 0.0, now: None = None, conn: None = None, kind: str | None = None,
                max_attempts: int | None = None, timeout: float | None = None,
                backoff: Backoff | Mapping[str, Any] | None = None) -> Enqueued:
        """Queue.enqueue on the server: created=False for an identical repeat, Conflict otherwise."""
        server_side(now=now, conn=conn)
        task = {name: value for name, value in (("kind", kind), ("max_attempts", max_attempts), ("timeout", timeout),
                                                ("backoff", wire_backoff(backoff))) if value is not None}
        data = self._http.post("enqueue", event_id=event_id, body=body, flow=flow, tenant=tenant, delay=delay, **task)
        return from_json(Enqueued, data)

    def enqueue_many(self, items: Iterable[Any], *, now: None = None, conn: None = None) -> list[Enqueued]:
        """Queue.enqueue_many on the server: all the items in one transaction, or none."""
        server_side(now=now, conn=conn)
        if isinstance(items, (str, bytes, Mapping)):
            raise InvalidInput("items", "must be an iterable of tuples or dicts")
        data = self._http.post("enqueue_many", items=[wire_item(item) for item in items])
        return [from_json(Enqueued, e) for e in data["enqueued"]]

    # -- claim -----------------------------------------------------------------------

    def claim(self, *, owner: str | None = None, now: None = None,
              lease_seconds: float | None = None) -> Lease | None:
        """Queue.claim on the server: the next head in fair order, or None."""
        server_side(now=now)
        data = self._http.post("claim", owner=owner, lease_seconds=self._lease(lease_seconds))
        return None if data is None else from_json(Lease, data)

    def claim_many(self, n: int, *, owner: str | None = None, now: None = None,
                   lease_seconds: float | None = None) -> list[Lease]:
        """Queue.claim_many on the server: up to n heads, at most one per flow."""
        server_side(now=now)
        data = self._http.post("claim_many", n=n, owner=owner, lease_seconds=self._lease(lease_seconds))
        return [] if data is None else [from_json(Lease, x) for x in data["leases"]]

    # -- settle ----------------------------------------------------------------------

    def settle(self, lease: Lease, outcome: Outcome | str, *, reason: str | None = None,
               delay: float | None = None, effect: None = None, now: None = None, result: Any = None) -> Settled:
        """Queue.settle on the server, fenced the same way (StaleLease, LeaseExpired)."""
        server_side(now=now, effect=effect)
        extra = {} if result is None else {"result": result}
        data = self._http.post("settle", lease=wire_lease(lease), outcome=outcome, reason=reason, delay=delay,
                               **extra)
        return from_json(Settled, data)

    # The shorthands are Queue's own: they only call self.settle.
    ack = Queue.ack
    retry = Queue.retry
    fail = Queue.fail
    release = Queue.release

    def settle_many(self, items: Iterable[Any], *, now: None = None) -> list[Settled | LeaseLost]:
        """Queue.settle_many on the server: a lost lease comes back in its slot."""
        server_side(now=now)
        batch = v.each(items, wire_settle_item, limit=MAX_BATCH)
        if not batch:
            return []
        data = self._http.post("settle_many", items=batch)
        return [settle_result(r) for r in data["results"]]

    def extend(self, lease: Lease, seconds: float | None = None, *, now: None = None) -> Lease:
        """Queue.extend on the server: the renewed lease, fenced."""
        server_side(now=now)
        return from_json(Lease, self._http.post("extend", lease=wire_lease(lease),
                                                seconds=self._lease(seconds)))

    # -- redrive and configuration -----------------------------------------------------

    def redrive(self, event_id: str, *, expected_generation: int, reason: str, actor: str | None = None,
                now: None = None) -> int:
        """Queue.redrive on the server; returns the new generation."""
        server_side(now=now)
        data = self._http.post("redrive", event_id=event_id, expected_generation=expected_generation,
                          reason=reason, actor=actor)
        return int(data["generation"])

    def redrive_many(self, items: Iterable[Any], *, reason: str, actor: str | None = None,
                     now: None = None) -> list[int | RedriveRefused]:
        """Queue.redrive_many on the server: a new generation or a RedriveRefused in each slot."""
        server_side(now=now)
        return self._each_fenced("redrive_many", "redriven", items, reason, actor)

    def discard(self, event_id: str, *, expected_generation: int, reason: str, actor: str | None = None,
                now: None = None) -> int:
        """Queue.discard on the server; returns the new generation."""
        server_side(now=now)
        data = self._http.post("discard", event_id=event_id, expected_generation=expected_generation,
                               reason=reason, actor=actor)
        return int(data["generation"])

    def discard_many(self, items: Iterable[Any], *, reason: str, actor: str | None = None,
                     now: None = None) -> list[int | RedriveRefused]:
        """Queue.discard_many on the server: a new generation or a RedriveRefused in each slot."""
        server_side(now=now)
        return self._each_fenced("discard_many", "discarded", items, reason, actor)

    def _each_fenced(self, verb: str, done_key: str, items: Iterable[Any], reason: str,
                     actor: str | None) -> list[int | RedriveRefused]:
        """Send a batch of (event_id, expected_generation) items, each fenced alone on
        the server; each slot's new generation or RedriveRefused, in order."""
        listed = list(items) if isinstance(items, (list, tuple)) else items
        if not isinstance(listed, (list, tuple)):
            raise InvalidInput("items", "must be a list of (event_id, expected_generation) pairs")
        wire = [dict(zip(("event_id", "expected_generation"), item)) if isinstance(item, (tuple, list)) and len(item) == 2
                else item for item in listed]
        data = self._http.post(verb, items=wire, reason=reason, actor=actor)
        results: list[int | RedriveRefused | None] = [None] * len(wire)
        for done in data[done_key]:
            results[done["index"]] = done["generation"]
        for refused in data["refused"]:
            error = error_from_json(409, refused)
            if not isinstance(error, RedriveRefused):
                raise RemoteError(409, "bad_response", f"a {verb} slot holds {refused.get('error')!r}")
            results[refused["index"]] = error
        if any(r is None for r in results):
            raise RemoteError(200, "bad_response", f"a {verb} answer leaves a slot empty")
        return [r for r in results if r is not None]

    def pause(self, flow: str, *, reason: str, actor: str | None = None, now: None = None) -> None:
        """Queue.pause on the server."""
        server_side(now=now)
        self._http.post("pause", flow=flow, reason=reason, actor=actor)

    def resume(self, flow: str, *, reason: str | None = None, actor: str | None = None, now: None = None) -> None:
        """Queue.resume on the server."""
        server_side(now=now)
        self._http.post("resume", flow=flow, reason=reason, actor=actor)

    def set_weight(self, flow: str, weight: int) -> None:
        """Queue.set_weight on the server."""
        self._http.post("set_weight", flow=flow, weight=weight)

    def set_tenant(self, tenant: str, *, weight: int | None = None, max_inflight: int | None = None,
                   rate: int | None = None, burst: int | None = None, reason: str | None = None,
                   actor: str | None = None, now: None = None) -> TenantInfo:
        """Queue.set_tenant on the server: the tenant as stored."""
        server_side(now=now)
        data = self._http.post("set_tenant", tenant=tenant, weight=weight, max_inflight=max_inflight, rate=rate,
                               burst=burst, reason=reason, actor=actor)
        return from_json(TenantInfo, data)

    def tenants(self, *, after: str | None = None, limit: int = 100, now: None = None) -> list[TenantInfo]:
        """Queue.tenants on the server, a page of at most MAX_PAGE tenants a request."""
        server_side(now=now)
        limit = v.count(limit, "limit", low=1, high=MAX_FLOWS_LISTED)
        return self._http.pages("tenants", "tenants", TenantInfo, limit, {"after": after})

    # -- reads -------------------------------------------------------------------------

    def get(self, event_id: str) -> EventInfo | None:
        """Queue.get on the server: everything stored about one event, or None."""
        data = self._http.send("get", {"event_id": event_id}, absent="unknown_event")
        return None if data is None else from_json(EventInfo, data)

    def result(self, event_id: str) -> Any:
        """Queue.result on the server: an acked event's result, else ResultNotReady."""
        data = self._http.send("result", {"event_id": event_id}, absent="unknown_event")
        if data is None:
            raise ResultNotReady(event_id, None)
        return data["result"]

    def wait(self, event_id: str, *, timeout: float) -> Any:
        """Queue.wait on the server: long polls of at most WAIT_CAP seconds each
        (and well within this Client's own timeout), until `timeout` passes."""
        timeout = v.seconds(timeout, "timeout")
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            ask = min(left, WAIT_CAP, self.timeout / 2)
            data = self._http.send("wait", {"event_id": event_id}, query={"timeout": f"{ask:.3f}"},
                                   absent="unknown_event")
            if data is None:
                raise ResultNotReady(event_id, None)
            if data.get("done"):
                return data["result"]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"event {event_id!r} is still {data.get('state')} after {timeout} s")

    def events(self, *, state: State | str | None = None, flow: str | None = None,
               limit: int = 100, after: str | None = None, kind: str | None = None) -> list[EventInfo]:
        """Queue.events on the server, a page of at most MAX_PAGE events a request."""
        limit = v.count(limit, "limit", low=1, high=MAX_EVENTS_LISTED)
        return self._http.pages("events", "events", EventInfo, limit,
                           {"state": state, "flow": flow, "after": after, "kind": kind})

    def audit(self, event_id: str | None = None, *, after: int | None = None,
              limit: int | None = None) -> list[AuditEntry]:
        """Queue.audit on the server, a page of at most MAX_PAGE rows a request."""
        if limit is not None:
            limit = v.count(limit, "limit", low=1, high=MAX_AUDIT_LISTED)
        return self._http.pages("audit", "audit", AuditEntry, limit, {"event_id": event_id}, {"after": after})

    def why_blocked(self, flow: str, *, now: None = None) -> Blocked:
        """Queue.why_blocked on the server; the redrive and discard commands it holds run from here."""
        server_side(now=now)
        return self._here(from_json(Blocked, self._http.send("why_blocked", {"flow": flow})))

    def flows(self, *, after: str | None = None, limit: int = 100, now: None = None) -> list[FlowInfo]:
        """Queue.flows on the server, a page of at most MAX_PAGE flows a request; each
        quarantined head's redrive and discard commands run from here."""
        server_side(now=now)
        limit = v.count(limit, "limit", low=1, high=MAX_FLOWS_LISTED)
        found = self._http.pages("flows", "flows", FlowInfo, limit, {"after": after})
        return [dataclasses.replace(f, blocked=self._here(f.blocked)) for f in found]

    def _here(self, blocked: Blocked) -> Blocked:
        """A Blocked whose redrive and discard commands go through this server."""
        if blocked.redrive is None:
            return blocked
        head, generation = blocked.event_id or "", blocked.generation or 0
        return dataclasses.replace(blocked, redrive=redrive_command("--url", self.url, head, generation),
                                   discard=discard_command("--url", self.url, head, generation))

    def stats(self, *, now: None = None, top: int = 10) -> Stats:
        """Queue.stats on the server, taken at the server's clock."""
        server_side(now=now)
        return from_json(Stats, self._http.send("stats", query=query(ints={"top": top})))

    # -- schedules -------------------------------------------------------------------------

    @property
    def schedules(self) -> RemoteSchedules:
        """The server's periodic schedules: add, get, list, remove, pause, resume."""
        return RemoteSchedules(self._http)

    def tick(self, *, now: None = None, ahead: float = 0.0) -> list[Enqueued]:
        """Queue.tick on the server, at the server's clock: the instances of every due slot."""
        server_side(now=now)
        return [from_json(Enqueued, e) for e in self._http.post("tick", ahead=ahead)["enqueued"]]

    # -- the wire ------------------------------------------------------------------------

    def _lease(self, seconds: float | None) -> Any:
        """The lease length to ask for: the call's, else this client's (the server checks it)."""
        return self.lease_seconds if seconds is None else seconds
