"""Create or upgrade the queue's tables in a PostgreSQL schema: a migration ladder.

Table fairq_schema holds one row per applied step. The steps an open
applies run in one transaction under a transaction-level advisory lock keyed
on the schema, so concurrent opens wait for each other and apply every step
exactly once. The server-side functions (the verbs and the rules they
evaluate) are not steps: FUNCTIONS holds their current definitions, which
every upgrade applies again after its steps (CREATE OR REPLACE), so each
function is defined in one place; a change to them comes with a new version,
whose step may be empty. A schema with a newer version than this fairq knows is refused
(SchemaError); a read-only open never creates or migrates. The open that
creates the tables stores its retry policy and its clock in the same
transaction (the `seed`); one that upgrades a queue to the step that records
the clock stores its clock. An Inbox opened where no queue is creates only
its receipts table (ensure_receipts), never the queue.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from typing import Any

from ...errors import SchemaError
from .connection import PgDatabase
from .failures import reraise

#: STEPS[v] upgrades a schema's tables from version v - 1 to version v
#: (None: the step changes only the functions). Steps 4 and 5 brought the
#: one-statement verbs; step 6 made them cheaper to run (FUNCTIONS); step 7
#: brought tenants; step 8 discard and pause; step 9 has a settle or extend
#: of a lease whose end a claim has already seen judged expired (FUNCTIONS);
#: step 10 tasks (an event's kind and its own retry policy); step 11
#: results and the waits for them.
STEPS: dict[int, str | None] = {1: "migrations/0001_initial.sql", 2: "migrations/0002_console.sql",
                                3: "migrations/0003_clock_mode.sql", 4: None, 5: None, 6: None,
                                7: "migrations/0004_tenants.sql", 8: "migrations/0005_operators.sql", 9: None,
                                10: "migrations/0006_tasks.sql", 11: "migrations/0007_results.sql"}
LATEST = 11
#: The functions as this fairq defines them, applied in order after the steps
#: of every upgrade.
FUNCTIONS = ("migrations/tenants.sql", "migrations/verbs.sql", "migrations/enqueue.sql",
             "migrations/operators.sql")
#: The first version that records the queue's clock (queue_clock.mode).
CLOCK_VERSION = 3
#: The first version with the one-statement verbs (fairq_claim, fairq_settle, fairq_extend).
VERBS_VERSION = 4
#: The first version with the one-statement enqueue (fairq_enqueue).
ENQUEUE_VERSION = 5
#: The first version with tenants (fairq_enqueue takes each item's tenant).
TENANTS_VERSION = 7
#: The first version with discard and pause (fairq_discard, fairq_set_paused).
OPERATORS_VERSION = 8
#: The first version with results (tables event_result and event_result_waiter).
RESULTS_VERSION = 11
#: The receipts table of an Inbox: made with step 1, or alone (ensure_receipts).
RECEIPTS = "migrations/receipts.sql"

#: Advisory lock space for migrations (the second key is the schema's hash).
_LOCK_SPACE = 0x6671


def read_step(path: str) -> str:
    """The text of a migration step shipped inside fairq.stores.postgres."""
    return importlib.resources.files(__package__).joinpath(path).read_text(encoding="utf-8")


def current_version(conn: Any) -> int:
    """The schema's applied version; 0 when it holds no fairq tables."""
    # to_regclass answers NULL for a missing table, without an error.
    found = conn.execute("SELECT to_regclass('fairq_schema') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM fairq_schema").fetchone()
    return int(row[0]) if row else 0


def current_state(conn: Any) -> tuple[int, str | None]:
    """(the applied version, the queue's clock: "server" or "model"; None
    before the version that records it)."""
    version = current_version(conn)
    if version < CLOCK_VERSION:
        return version, None
    # The one clock row, written with the queue.
    row = conn.execute("SELECT mode FROM queue_clock WHERE id = 1").fetchone()
    return version, str(row[0])


def store_clock(conn: Any, mode: str) -> None:
    """Record the clock of the open that creates the queue (or upgrades it to CLOCK_VERSION)."""
    # Written once, in the transaction that creates (or upgrades) the queue.
    conn.execute("UPDATE queue_clock SET mode = %(mode)s WHERE id = 1", {"mode": mode})


def require_current(db: PgDatabase) -> tuple[int, str | None]:
    """For a read-only open: the schema must already be current; (version, clock)."""
    version, mode = db.read(current_state)
    if version == 0:
        raise SchemaError(f"no fairq queue in {db.url} (schema {db.place[1]}); run `fairq init` or "
                          "enqueue to create it")
    _refuse_newer(db, version)
    if version < LATEST:
        raise SchemaError(f"{db.url} has fairq schema version {version}, older than this fairq's "
                          f"({LATEST}); open it for writing once to upgrade it")
    return version, mode


def ensure_schema(db: PgDatabase, seed: Callable[[Any], None] | None,
                  clock: str | None = None) -> tuple[int, str | None]:
    """Make the schema a current fairq queue; (its version, its clock). The
    steps missing run in one transaction. seed(conn) runs in the transaction
    that creates the tables, never after another process did; `clock` is
    recorded by the one that creates them or upgrades them to CLOCK_VERSION."""
    version, mode = db.read(current_state)
    _refuse_newer(db, version)
    if version >= LATEST:
        return version, mode
    with db.write("migrate") as conn:
        _lock(conn)
        conn.execute("CREATE TABLE IF NOT EXISTS fairq_schema ("
                     "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        start = current_version(conn)
        _refuse_newer(db, start)
        for step in range(start + 1, LATEST + 1):
            path = STEPS[step]
            if path is not None:
                _run(db, conn, path)
            if step == 1:
                _run(db, conn, RECEIPTS)
            # Each step is recorded in the transaction that applies it: applied once, or not at all.
            conn.execute("INSERT INTO fairq_schema (version) VALUES (%(v)s)", {"v": step})
        for path in FUNCTIONS:
            _run(db, conn, path)
        if start == 0 and seed is not None:
            seed(conn)
        if start < CLOCK_VERSION <= LATEST and clock is not None:
            store_clock(conn, clock)
        found = current_state(conn)
    return found


def ensure_receipts(db: PgDatabase) -> None:
    """Make sure an Inbox's receipts table exists, creating nothing else: the
    queue (and its policy and clock) is created by the first Queue opened."""
    def look(conn: Any) -> tuple[int, bool]:
        present = conn.execute("SELECT to_regclass('fairq_receipt') IS NOT NULL").fetchone()
        return current_version(conn), bool(present and present[0])

    version, present = db.read(look)
    _refuse_newer(db, version)
    if present:
        return
    with db.write("inbox_migrate") as conn:
        _lock(conn)
        _refuse_newer(db, current_version(conn))
        _run(db, conn, RECEIPTS)


def _lock(conn: Any) -> None:
    # One migrator per schema at a time; the others wait here, then see its work.
    conn.execute("SELECT pg_advisory_xact_lock(%(space)s, hashtext(current_schema()))", {"space": _LOCK_SPACE})


def _run(db: PgDatabase, conn: Any, path: str) -> None:
    try:
        conn.execute(read_step(path).encode())
    except Exception as exc:
        reraise(exc, db.url)
        raise


def _refuse_newer(db: PgDatabase, version: int) -> None:
    if version > LATEST:
        raise SchemaError(f"{db.url} has fairq schema version {version}, newer than this fairq "
                          f"understands ({LATEST}); upgrade fairq")
