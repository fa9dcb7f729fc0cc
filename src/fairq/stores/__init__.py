"""The stores, one package per database, and the one place that picks a store.

Above this package nothing names a database: the Queue facade, Inbox, the
CLI and the workers speak the protocols of fairq.stores.backend, and reach
what differs between stores (waiting for work, reconnecting, receipts)
through capabilities those protocols name. The functions here are the
only code that looks at a target and decides which store serves it: a
string starting with postgresql:// or postgres:// is a PostgreSQL database
(fairq.stores.postgres, which needs the `fairq[postgres]` extra), anything
else an SQLite file (fairq.stores.sqlite). Each store asks fairq.kernel
for every decision both stores make (docs/architecture.md).

Store modules are imported when a store opens, not with this package, so
`import fairq` never imports psycopg.
"""

from __future__ import annotations

from typing import Any

from ..kernel.policy import Policy
from .backend import InboxStore, Store
from .postgres import is_postgres_url

__all__ = ["open_store", "open_inbox", "uses_server_clock", "names_server", "shown", "stored_clock"]


def open_store(target: Any, *, synchronous: str, busy_timeout: float, readonly: bool = False,
               policy: Policy | None = None, clock: Any = None) -> Store:
    """Open (creating and migrating it if needed, unless readonly) the queue store at `target`:
    a PostgreSQL URL's database and current schema, or an SQLite file.
    clock: the Queue's clock argument (see uses_server_clock)."""
    if is_postgres_url(target):
        from .postgres.store import PgStore  # imports psycopg: only for a PostgreSQL URL
        from .sqlite.connection import check_settings

        check_settings(synchronous, busy_timeout)  # the SQLite settings are checked, though unused

        return PgStore(target, readonly=readonly, policy=policy, server_clock=uses_server_clock(target, clock))
    from .sqlite.store import SqliteStore

    return SqliteStore(target, synchronous=synchronous, busy_timeout=busy_timeout, readonly=readonly, policy=policy)


def open_inbox(target: Any, *, synchronous: str, busy_timeout: float) -> InboxStore:
    """The receipts of an Inbox at `target` (created if missing): a PostgreSQL
    URL's current schema, or an SQLite file that may hold the application's tables."""
    if is_postgres_url(target):
        from .postgres.inbox import PgInbox

        return PgInbox(target)
    from .sqlite.inbox import SqliteInbox

    return SqliteInbox(target, synchronous=synchronous, busy_timeout=busy_timeout)


def uses_server_clock(target: Any, clock: Any) -> bool:
    """Does a queue at `target` opened with this clock argument run at its
    database server's time? Only a PostgreSQL queue can, and does unless
    clock is "model" or a callable (a stored model clock, as on SQLite)."""
    return is_postgres_url(target) and (clock is None or clock == "server")


def names_server(target: str) -> bool:
    """True for a target that names a database server, not a file (no file checks apply)."""
    return is_postgres_url(target)


def shown(target: str) -> str:
    """The target for messages and logs: a file's path, or a URL without its
    password (user:password@, ?password=, ?sslpassword=)."""
    if not is_postgres_url(target):
        return target
    from .postgres.url import redacted

    return redacted(target)


def stored_clock(target: str) -> str | None:
    """The clock the queue at `target` runs at as stored with it ("server" or
    "model"): None for a file (whose Queue says its clock) or where there is
    no queue yet. Reads only."""
    if not is_postgres_url(target):
        return None
    from .postgres import stored_clock as stored

    return stored(target)
