"""Create or upgrade the queue's tables in a PostgreSQL schema: a migration ladder.

Table fairq_schema holds one row per applied step. Each step runs in one
transaction under a transaction-level advisory lock keyed on the schema, so
concurrent opens wait for each other and apply every step exactly once. A
schema with a newer version than this fairq knows is refused (SchemaError);
a read-only open never creates or migrates. The open that creates the
tables stores its retry policy in the same transaction (the `seed`).
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from typing import Any

from ..errors import SchemaError
from .connection import PgDatabase
from .failures import reraise

#: STEPS[v] upgrades a schema from version v - 1 to version v.
STEPS: dict[int, str] = {1: "migrations/0001_initial.sql", 2: "migrations/0002_console.sql"}
LATEST = 2

#: Advisory lock space for migrations (the second key is the schema's hash).
_LOCK_SPACE = 0x6671


def read_step(path: str) -> str:
    """The text of a migration step shipped inside fairq.postgres."""
    return importlib.resources.files(__package__).joinpath(path).read_text(encoding="utf-8")


def current_version(conn: Any) -> int:
    """The schema's applied version; 0 when it holds no fairq tables."""
    # to_regclass answers NULL for a missing table, without an error.
    found = conn.execute("SELECT to_regclass('fairq_schema') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM fairq_schema").fetchone()
    return int(row[0]) if row else 0


def require_current(db: PgDatabase) -> int:
    """For a read-only open: the schema must already be current."""
    version = db.read(current_version)
    if version == 0:
        raise SchemaError(f"no fairq queue in {db.url} (schema {db.place[1]}); run `fairq init` or "
                          "enqueue to create it")
    _refuse_newer(db, version)
    if version < LATEST:
        raise SchemaError(f"{db.url} has fairq schema version {version}, older than this fairq's "
                          f"({LATEST}); open it for writing once to upgrade it")
    return version


def ensure_schema(db: PgDatabase, seed: Callable[[Any], None] | None) -> int:
    """Make the schema a current fairq queue; return its version. seed(conn)
    runs in the transaction that creates the tables, never after another
    process did."""
    version = db.read(current_version)
    _refuse_newer(db, version)
    while version < LATEST:
        with db.write("migrate", lambda: None) as conn:
            # One migrator per schema at a time; the others wait here, then see its work.
            conn.execute("SELECT pg_advisory_xact_lock(%(space)s, hashtext(current_schema()))",
                         {"space": _LOCK_SPACE})
            conn.execute("CREATE TABLE IF NOT EXISTS fairq_schema ("
                         "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            version = current_version(conn)
            _refuse_newer(db, version)
            if version >= LATEST:
                break
            step = version + 1
            try:
                conn.execute(read_step(STEPS[step]).encode())
            except Exception as exc:
                reraise(exc, db.url)
                raise
            # The step is recorded in its own transaction: applied once, or not at all.
            conn.execute("INSERT INTO fairq_schema (version) VALUES (%(v)s)", {"v": step})
            if step == 1 and seed is not None:
                seed(conn)
            version = step
    return version


def _refuse_newer(db: PgDatabase, version: int) -> None:
    if version > LATEST:
        raise SchemaError(f"{db.url} has fairq schema version {version}, newer than this fairq "
                          f"understands ({LATEST}); upgrade fairq")
