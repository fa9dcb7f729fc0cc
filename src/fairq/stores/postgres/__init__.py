"""The PostgreSQL store: fairq's promises on a PostgreSQL database.

Importing this package does not import psycopg: only opening a store does
(fairq.stores.postgres.connection), so `import fairq` and the SQLite store work
without it. What other modules need without a connection lives here: which
targets are PostgreSQL URLs, the channels the store notifies when work
becomes claimable or will be, and the clock a queue was stored with.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DUE_CHANNEL", "READY_CHANNEL", "RESULT_CHANNEL", "is_postgres_url", "stored_clock"]

#: The LISTEN/NOTIFY channel a transaction notifies (once, with an empty
#: payload) when it makes a head claimable now; workers LISTEN on it.
READY_CHANNEL = "fairq_ready"

#: The channel a transaction notifies (payload: the time in ms of the queue's
#: clock) when it leaves a head waiting until a later time (a delayed enqueue,
#: a backoff, a delayed release) and makes nothing claimable now: a worker
#: asleep past that time wakes at it instead.
DUE_CHANNEL = "fairq_due"

#: The channel a settle or discard of an event someone waits for (a row in
#: event_result_waiter) notifies, with the event's id as payload: Queue.wait LISTENs on it.
RESULT_CHANNEL = "fairq_result"

#: The URL schemes that name a PostgreSQL database.
SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: Any) -> bool:
    """Is this Queue/Inbox target a PostgreSQL URL (postgresql:// or postgres://)?"""
    return isinstance(target, str) and target.startswith(SCHEMES)


def stored_clock(url: str) -> str | None:
    """The clock the queue at `url` runs at, as stored with it ("server" or
    "model"); None where there is no queue yet (or one from before fairq
    stored its clock). Reads only, on a read-only session."""
    from .connection import PgDatabase
    from .schema import current_state

    db = PgDatabase(url, readonly=True)
    try:
        return db.read(current_state)[1]
    finally:
        db.close()
