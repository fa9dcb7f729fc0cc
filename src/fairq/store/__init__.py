"""The store layer: every SQL statement fairq runs lives in this package.

Above it (fairq.queue, fairq.schedules) nothing knows which database it talks
to: the facade speaks the protocols of fairq.backend, and open_store is the
one place that picks the store for a Queue's `path` argument. A store for
another database implements the same protocols and asks fairq.rules and
fairq.policy for every decision (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

from ..backend import Store
from ..policy import Policy
from ..postgres import is_postgres_url, open_pg_store
from .queue import QueueStore
from .sqlite import check_settings


def open_store(path: Any, *, synchronous: str, busy_timeout: float, readonly: bool = False,
               policy: Policy | None = None, clock: Any = None) -> Store:
    """Open (creating and migrating it if needed, unless readonly) the queue store at `path`.

    A string starting with postgresql:// or postgres:// opens the PostgreSQL
    store (fairq.postgres; it needs the `fairq[postgres]` extra) in the
    URL's database and current schema; anything else is an SQLite file.
    clock: the Queue's clock argument (see uses_server_clock).
    """
    if is_postgres_url(path):
        check_settings(synchronous, busy_timeout)  # the SQLite settings are checked, though unused
        store: Store = open_pg_store(path, readonly=readonly, policy=policy,
                                     server_clock=uses_server_clock(path, clock))
        return store
    return QueueStore(path, synchronous=synchronous, busy_timeout=busy_timeout, readonly=readonly, policy=policy)


def uses_server_clock(path: Any, clock: Any) -> bool:
    """Does a queue at `path` opened with this clock argument run at its
    database server's time? Only a PostgreSQL queue can, and does unless
    clock is "model" or a callable (a stored model clock, as on SQLite)."""
    return is_postgres_url(path) and (clock is None or clock == "server")
