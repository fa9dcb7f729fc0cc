"""Create or upgrade a queue database: application_id check and user_version ladder.

A fresh file gets queue.sql, the one DDL source, and the latest version. An
older fairq file gets each step in migrations/ after its version, in order,
in one transaction. A file marked by another application, or written by a
newer fairq, is refused with a SchemaError; nothing is changed. The open that
creates the file, or upgrades it to the version that stores the retry
policy, stores its policy in the same transaction (the `seed` callback).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from ...errors import SchemaError
from .connection import Database, read_script

#: PRAGMA application_id of every fairq queue file: b"fq\x00\x01".
APPLICATION_ID = 0x66710001

#: MIGRATIONS[v] upgrades a database from version v - 1 to version v.
#: Version 1 is the first released schema; its steps start at 2.
MIGRATIONS: dict[int, str] = {2: "migrations/0002_schedules.sql", 3: "migrations/0003_retention.sql",
                              4: "migrations/0004_clock_reset.sql", 5: "migrations/0005_policy.sql",
                              6: "migrations/0006_queue_state.sql", 7: "migrations/0007_tenants.sql",
                              8: "migrations/0008_operators.sql", 9: "migrations/0009_tasks.sql",
                              10: "migrations/0010_results.sql"}
LATEST = 10
#: The first version whose file stores the retry policy (table policy).
POLICY_VERSION = 5

#: Tables fairq owns in its file; a foreign table of the same name is refused.
OWN_TABLES = ("queue_state", "flow", "event", "audit", "schedule", "tombstone", "retention", "policy", "tenant",
              "event_result")

#: The tables each step creates: an application's own table of the same name
#: in the file refuses the upgrade before anything changes.
STEP_TABLES: dict[int, tuple[str, ...]] = {2: ("schedule",), 3: ("tombstone", "retention"), 4: ("audit",),
                                           5: ("audit", "policy"), 6: ("queue_state",), 7: ("tenant", "audit"),
                                           8: ("event", "audit"), 9: (), 10: ("event_result",)}

#: Tables a step creates again with their rows (fairq's own since an earlier
#: version, so they are not clashes).
REBUILT_TABLES: dict[int, tuple[str, ...]] = {4: ("audit",), 5: ("audit",), 7: ("audit",), 8: ("event", "audit")}


def refuse_foreign(conn: sqlite3.Connection, path: object) -> None:
    """Refuse, before anything writes the file, one that belongs to another
    application or to a newer fairq, or that holds tables of the names fairq
    is about to create. An unmarked file (application_id and user_version 0:
    new, or the application's own outbox file) is fine. Only reads."""
    marks = _marks(conn)
    while True:
        try:
            _refuse_marked(conn, path, *marks)
            return
        except SchemaError:
            # Outside a transaction each read is its own snapshot: another
            # process may have just created or upgraded the file, its tables
            # and marks together. Judge the file again as it now is.
            again = _marks(conn)
            if again == marks:
                raise
            marks = again


def _refuse_marked(conn: sqlite3.Connection, path: object, app_id: int, version: int) -> None:
    if app_id == APPLICATION_ID:
        if version > LATEST:
            raise SchemaError(
                f"{path!s} has fairq schema version {version}, newer than this fairq "
                f"understands ({LATEST}); upgrade fairq"
            )
        _refuse_clashes(conn, path, _new_tables(version))
    elif app_id != 0 or version != 0:
        raise SchemaError(
            f"{path!s} belongs to another application "
            f"(application_id {app_id:#x}, user_version {version}); fairq will not touch it"
        )
    else:
        _refuse_clashes(conn, path, OWN_TABLES)


def refuse_outdated(conn: sqlite3.Connection, path: object) -> None:
    """Refuse, for a read-only opening, a file that is not a current fairq
    queue: one a writer would first have to create or upgrade. Only reads."""
    refuse_foreign(conn, path)
    app_id, version = _marks(conn)
    if app_id != APPLICATION_ID:
        raise SchemaError(f"{path!s} is not a fairq database (empty, or another application's file); "
                          "run `fairq init` or enqueue to make it one")
    if version < LATEST:
        raise SchemaError(f"{path!s} has fairq schema version {version}, older than this fairq's "
                          f"({LATEST}); to upgrade it, open it for writing once with the application's own "
                          "settings (its Queue(path, max_attempts=..., backoff=..., lease_seconds=...)), or run "
                          "`fairq init` and then `fairq policy set`")


def ensure_schema(db: Database, seed: Callable[[sqlite3.Connection], None] | None = None) -> int:
    """Make the file a current fairq queue database; return its version.

    seed(conn) runs in the same transaction when this call created the file
    or upgraded it past POLICY_VERSION (its policy row then holds defaults),
    never when another process did so first."""
    app_id, version = db.read(_marks)
    if app_id == APPLICATION_ID and version == LATEST:
        return version
    with db.write("migrate") as conn:
        refuse_foreign(conn, db.path)  # again, under the write lock
        app_id, version = _marks(conn)
        if app_id == 0:
            _refuse_clashes(conn, db.path, OWN_TABLES)
            db.run_script(conn, read_script("queue.sql"))
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID:d}")
        else:
            _refuse_clashes(conn, db.path, _new_tables(version))
            for step in range(version + 1, LATEST + 1):
                db.run_script(conn, read_script(MIGRATIONS[step]))
        if seed is not None and (app_id == 0 or version < POLICY_VERSION):
            seed(conn)
        conn.execute(f"PRAGMA user_version = {LATEST:d}")
    return LATEST


def _new_tables(version: int) -> list[str]:
    """The tables the steps after `version` create (a step that rebuilds a
    table of fairq's own does not count it as new)."""
    return [t for step in range(version + 1, LATEST + 1) for t in STEP_TABLES.get(step, ())
            if t not in REBUILT_TABLES.get(step, ())]


def _marks(conn: sqlite3.Connection) -> tuple[int, int]:
    """(application_id, user_version) from the file's header."""
    # Header fields: reading them writes nothing, even on a foreign file.
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return app_id, version


def _refuse_clashes(conn: sqlite3.Connection, path: object, names: Sequence[str]) -> None:
    # The file may hold the application's own tables (outbox use), but not
    # tables with the names fairq is about to create.
    rows = conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' "
        "AND name IN (SELECT value FROM json_each(:names))",
        {"names": json.dumps(list(names))},
    ).fetchall()
    if rows:
        names = ", ".join(sorted(r[0] for r in rows))
        raise SchemaError(f"{path!s} already has tables named {names}; fairq needs those names")
