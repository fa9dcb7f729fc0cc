"""The verb table: every verb of a queue declared once.

Each Verb names a public method of fairq.Queue (or of ``queue.schedules``,
as "schedules.add"), the facade module that defines it, the HTTP route that serves it, whether a
cancelled async call gives back the leases it took, and each place it is
deliberately absent from, with the reason. fairq.http.routes takes each
endpoint's method and path from here (``@serves("enqueue")``), and
fairq.aio picks each coroutine's form here; tests/test_verb_table.py fails
when Queue, Client, AsyncQueue, AsyncClient, the schedules objects or the
routes have a verb the table lacks, or lack one it holds without a reason.
It imports nothing of fairq, so every layer may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Place", "Verb", "VERBS", "NOT_VERBS", "route_of", "claims"]


class Place(str, Enum):
    """Where a verb can be absent from (Queue has them all)."""

    CLIENT = "client"  # fairq.Client, and so fairq.aio.AsyncClient
    HTTP = "http"  # a route of `fairq serve`
    ASYNC = "async"  # fairq.aio.AsyncQueue and AsyncClient


@dataclass(frozen=True)
class Verb:
    """One verb: its name, the group that defines it (a module of fairq.api, or
    "schedules": fairq.schedules.Schedules), its route ("POST /v1/enqueue"; None when absent
    from HTTP), whether a cancelled async call gives back its leases, and why
    it is absent where it is (`absent`, by place)."""

    name: str
    group: str
    route: str | None = None
    claims: bool = False
    absent: Mapping[Place, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.route is None) != (Place.HTTP in self.absent):
            raise ValueError(f"verb {self.name}: a route, or the reason it has none, not both")


_SHORTHAND = "a shorthand of settle: it is sent as POST /v1/settle"
_ON_THE_HOST = "an operator's act on the server's file: run the fairq command on the server's host"
_NO_REMOTE = {Place.CLIENT: _ON_THE_HOST, Place.HTTP: _ON_THE_HOST}

_TABLE = (
    Verb("enqueue", "queue", "POST /v1/enqueue"),
    Verb("enqueue_many", "queue", "POST /v1/enqueue_many"),
    Verb("ingest", "queue", absent={
        Place.CLIENT: "it checks a whole JSONL stream; over HTTP send enqueue_many",
        Place.HTTP: "it checks a whole JSONL stream; over HTTP send enqueue_many",
        Place.ASYNC: "it reads its source on the queue's thread for as long as the source takes; "
                     "await q.run(lambda queue: queue.ingest(source)) where that is wanted"}),
    Verb("claim", "queue", "POST /v1/claim", claims=True),
    Verb("claim_many", "queue", "POST /v1/claim_many", claims=True),
    Verb("settle", "queue", "POST /v1/settle"),
    Verb("ack", "queue", absent={Place.HTTP: _SHORTHAND}),
    Verb("retry", "queue", absent={Place.HTTP: _SHORTHAND}),
    Verb("fail", "queue", absent={Place.HTTP: _SHORTHAND}),
    Verb("release", "queue", absent={Place.HTTP: _SHORTHAND}),
    Verb("settle_many", "queue", "POST /v1/settle_many"),
    Verb("extend", "queue", "POST /v1/extend"),
    Verb("tick", "scheduling", "POST /v1/tick"),
    Verb("redrive", "operators", "POST /v1/redrive"),
    Verb("redrive_many", "operators", "POST /v1/redrive_many"),
    Verb("discard", "operators", "POST /v1/discard"),
    Verb("discard_many", "operators", "POST /v1/discard_many"),
    Verb("pause", "operators", "POST /v1/pause"),
    Verb("resume", "operators", "POST /v1/resume"),
    Verb("purge", "maintenance", absent=_NO_REMOTE),
    Verb("reset_clock", "maintenance", absent=_NO_REMOTE),
    Verb("reconnect", "waits", absent={
        Place.CLIENT: "a Client replaces a closed connection by itself",
        Place.HTTP: "a Client replaces a closed connection by itself",
        Place.ASYNC: "AsyncWorker reconnects the Queue it runs after an outage, on the queue's thread"}),
    Verb("get", "reads", "GET /v1/events/{event_id}"),
    Verb("result", "results", "GET /v1/result/{event_id}"),
    Verb("wait", "results", "GET /v1/wait/{event_id}"),
    Verb("events", "reads", "GET /v1/events"),
    Verb("flows", "reads", "GET /v1/flows"),
    Verb("why_blocked", "reads", "GET /v1/flows/{flow}/why_blocked"),
    Verb("audit", "reads", "GET /v1/audit"),
    Verb("stats", "reads", "GET /v1/stats"),
    Verb("wait_for_work", "waits", absent={
        Place.CLIENT: "a database's notices of new work do not cross HTTP; a worker on a Client polls",
        Place.HTTP: "a database's notices of new work do not cross HTTP; a worker on a Client polls",
        Place.ASYNC: "AsyncWorker shares one wait of its own (fairq.aio.waits), off the queue's threads"}),
    Verb("policy", "configuration", absent={
        Place.CLIENT: "the policy is stored in the server's file: fairq policy show on its host",
        Place.HTTP: "GET /v1/info shows it to the console; fairq policy show on the server's host"}),
    Verb("set_policy", "configuration", absent=_NO_REMOTE),
    Verb("set_weight", "operators", "POST /v1/set_weight"),
    Verb("set_tenant", "tenants", "POST /v1/set_tenant"),
    Verb("tenants", "tenants", "GET /v1/tenants"),
    Verb("schedules.add", "schedules", "POST /v1/schedules"),
    Verb("schedules.get", "schedules", "GET /v1/schedules/{name}"),
    Verb("schedules.list", "schedules", "GET /v1/schedules"),
    Verb("schedules.misfires", "schedules", "GET /v1/schedules/{name}/misfires"),
    Verb("schedules.remove", "schedules", "DELETE /v1/schedules/{name}"),
    Verb("schedules.pause", "schedules", "POST /v1/schedules/{name}/pause"),
    Verb("schedules.resume", "schedules", "POST /v1/schedules/{name}/resume"),
)

#: Every verb by name.
VERBS: Mapping[str, Verb] = {verb.name: verb for verb in _TABLE}

#: The public names of Queue that are not verbs: the object's own lifetime and
#: settings, read on the calling thread. Each async class and Client has its own.
NOT_VERBS = frozenset({"close", "settings", "schedules", "lease_seconds", "max_attempts", "backoff",
                       "parallel_calls", "schema_version"})


def route_of(name: str) -> tuple[str, str]:
    """The method and path of the route that serves verb `name` (KeyError: none)."""
    route = VERBS[name].route
    if route is None:
        raise KeyError(f"verb {name} has no route: {VERBS[name].absent[Place.HTTP]}")
    method, path = route.split(" ")
    return method, path


def claims(name: str) -> bool:
    """Does verb `name` lease events (so a cancelled async call gives them back)?"""
    return VERBS[name].claims
