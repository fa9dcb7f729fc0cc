"""The listing endpoints: every answer that lists rows is one bounded page.

Each listing takes `limit` (a default page when absent, at most MAX_PAGE; a
larger one is refused naming `limit`) and asks its one Queue call for one
row more than the page, only to know whether rows were left off. A listing
with a key (events, flows, schedules, the audit log by its rows' ids)
takes `after`, the key of the last row of the previous page, and answers
`next`: the `after` that gets the next page, or null when this page ends
the listing. A schedule's misfires (newest first) have no key here; they
answer `more`: whether rows were left off. Nothing here knows about sockets or tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .. import _validate as v
from ..errors import InvalidInput
from ..api.queue import Queue
from .routes import Reply, Request, serves
from ..limits import MAX_PAGE
from .wire import to_json

__all__ = ["MAX_PAGE", "DEFAULT_PAGE", "DEFAULT_MISFIRES"]

T = TypeVar("T")

#: Rows a listing answers when the request names no limit.
DEFAULT_PAGE = 100
#: A schedule's misfires answered when the request names no limit (as Queue's default).
DEFAULT_MISFIRES = 20


def _page_size(params: dict[str, Any], default: int) -> int:
    """The request's page size, taken out of `params`: its limit, checked, or `default`."""
    limit = params.pop("limit", default)
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", f"must be between 1 and {MAX_PAGE} rows a page (page on with "
                           f"after=, or ask for fewer), got {limit}")
    return int(limit)


def _keyed(name: str, rows: Sequence[T], size: int, key: Callable[[T], str]) -> Reply:
    """A page of a keyed listing from up to size + 1 rows: the first `size`, and
    the key to go on after (null when no row was left off)."""
    page = rows[:size]
    return 200, {name: to_json(list(page)), "next": key(page[-1]) if len(rows) > size else None}


def _unkeyed(name: str, rows: Sequence[T], size: int) -> Reply:
    """A page of a listing without a key: the first `size` rows, and whether any was left off."""
    return 200, {name: to_json(list(rows[:size])), "more": len(rows) > size}


@serves("events", console=True)
def events(q: Queue, req: Request) -> Reply:
    args = req.params(text=("state", "flow", "after", "kind"), ints=("limit",))
    size = _page_size(args, DEFAULT_PAGE)
    return _keyed("events", q.events(**args, limit=size + 1), size, lambda e: e.event_id)


@serves("flows", console=True)
def flows(q: Queue, req: Request) -> Reply:
    args = req.params(text=("after",), ints=("limit",))
    size = _page_size(args, DEFAULT_PAGE)
    return _keyed("flows", q.flows(**args, limit=size + 1), size, lambda f: f.name)


@serves("tenants", console=True)
def tenants(q: Queue, req: Request) -> Reply:
    args = req.params(text=("after",), ints=("limit",))
    size = _page_size(args, DEFAULT_PAGE)
    return _keyed("tenants", q.tenants(**args, limit=size + 1), size, lambda t: t.name)


@serves("schedules.list", console=True)
def schedules(q: Queue, req: Request) -> Reply:
    args = req.params(text=("after",), ints=("limit",))
    size = _page_size(args, DEFAULT_PAGE)
    # Queue lists every schedule (an operator's few); the page is cut here, in
    # code point order, which every store's names sort the same way in.
    found = sorted(q.schedules.list(), key=lambda s: s.name)
    after = v.optional_identifier(args.get("after"), "after")
    if after is not None:
        found = [s for s in found if s.name > after]
    return _keyed("schedules", found[:size + 1], size, lambda s: s.name)


@serves("audit", console=True)
def audit(q: Queue, req: Request) -> Reply:
    args = req.params(text=("event_id",), ints=("after", "limit"))
    size = _page_size(args, DEFAULT_PAGE)
    rows = q.audit(**args, limit=size + 1)
    page = rows[:size]
    return 200, {"audit": to_json(list(page)), "next": page[-1].id if len(rows) > size else None}


@serves("schedules.misfires", console=True)
def misfires(q: Queue, req: Request) -> Reply:
    args = req.params(ints=("limit",))
    size = _page_size(args, DEFAULT_MISFIRES)
    return _unkeyed("misfires", q.schedules.misfires(req.path["name"], limit=size + 1), size)
