"""The endpoints the console adds to the API, and the console's own files.

Each /v1 endpoint here is one Queue call, like those of fairq.http.routes
(GET /v1/rates answers from the server's sampler and calls nothing). The
listings it pages through are in fairq.http.listings. /ui/ serves the
console's files (fairq.http.static) without a token: they hold no data.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInput, RedriveRefused
from ..kernel.policy import policy_json
from ..api.queue import Queue
from ..limits import MAX_BATCH
from .routes import Refusal, Reply, Request, Text, route, serves
from .static import console_file
from .wire import queue_error_json

__all__: list[str] = []


@serves("redrive_many", console=True)
def redrive_many(q: Queue, req: Request) -> Reply:
    return _each_fenced(req, q.redrive_many, "redriven")


@serves("discard_many", console=True)
def discard_many(q: Queue, req: Request) -> Reply:
    return _each_fenced(req, q.discard_many, "discarded")


def _each_fenced(req: Request, call: Any, done_key: str) -> Reply:
    """A batch of (event_id, expected_generation) items, each fenced alone by
    `call` (redrive_many or discard_many): those done under `done_key`, the
    refused with their errors, each with its index in the request."""
    args = req.fields("items", "reason", optional=("actor",))
    items = args.pop("items")
    if not isinstance(items, list):
        raise InvalidInput("items", "must be an array of {event_id, expected_generation} objects")
    if len(items) > MAX_BATCH:  # the cap of one HTTP call
        raise InvalidInput("items", f"at most {MAX_BATCH} per call")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInput(f"items[{i}]", "must be an object with event_id and expected_generation")
    results = call(items, **args)
    done: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for i, (item, result) in enumerate(zip(items, results)):
        if isinstance(result, RedriveRefused):
            refused.append({"index": i, **queue_error_json(result)})
        else:
            done.append({"index": i, "event_id": item["event_id"], "generation": result})
    return 200, {done_key: done, "refused": refused}


@route("GET", "/v1/info", console=True)
def info(q: Queue, req: Request) -> Reply:
    return 200, {"schema_version": q.schema_version, "policy": policy_json(q.policy()),
                 "read_only": req.edge.read_only, "rates": req.edge.rates is not None}


@route("GET", "/v1/rates", console=True)
def rates(q: Queue, req: Request) -> Reply:
    req.params()  # none
    if req.edge.rates is None:
        return 200, {"sample_seconds": None, "minutes": []}
    return 200, req.edge.rates.answer()


# -- the console's files ---------------------------------------------------------------


@route("GET", "/ui", public=True, console=True)
def ui_redirect(q: Queue, req: Request) -> Reply:
    return 308, Text("", "text/plain; charset=utf-8", {"Location": "/ui/"})


@route("GET", "/ui/", public=True, console=True)
def ui_index(q: Queue, req: Request) -> Reply:
    return 200, console_file("index.html")


@route("GET", "/ui/{name}", public=True, console=True)
def ui_file(q: Queue, req: Request) -> Reply:
    if req.query:
        raise Refusal("not_found", "console files take no query")
    return 200, console_file(req.path["name"])
