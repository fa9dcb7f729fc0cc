"""What every subcommand shares: the database path, exit codes, output helpers."""

from __future__ import annotations

import argparse
import datetime
import json
import os
from collections.abc import Sequence
from typing import Any

from ..errors import FairqError
from .._json import to_json
from ..queue import Queue
from ..types import AuditEntry, EventInfo, Stats

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2  # argparse's own exit status for usage errors
EXIT_INTERRUPTED = 130  # 128 + SIGINT: stopped by Ctrl-C
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`)


def database_path(args: argparse.Namespace | str | None = None) -> str:
    """The database every command and example uses: --db (parsed `args`, or
    the option's value as a string), else $FAIRQ_DB, else ./fairq.db."""
    given = getattr(args, "db", None) if isinstance(args, argparse.Namespace) else args
    return given or os.environ.get("FAIRQ_DB") or "fairq.db"


def open_existing(args: argparse.Namespace, **settings: Any) -> Queue:
    """The queue at the chosen path (opened with Queue `settings`); refuses
    to create one where there is none."""
    path = database_path(args)
    if not os.path.exists(path):
        raise FairqError(f"no fairq database at {path} (set --db or FAIRQ_DB, or run fairq init)")
    if os.path.isdir(path):
        raise FairqError(f"{path} is a directory, not a fairq database (set --db or FAIRQ_DB)")
    return Queue(path, **settings)


def stats_json(stats: Stats) -> dict[str, Any]:
    """A Stats as plain JSON values (the unbounded lag bucket's bound is "+Inf")."""
    found: dict[str, Any] = to_json(stats)
    return found


def print_json(value: Any) -> None:
    """One JSON document on stdout, keys sorted, for programs to read."""
    print(json.dumps(value, sort_keys=True, ensure_ascii=False))


def event_json(info: EventInfo) -> dict[str, Any]:
    """An EventInfo as plain JSON values (times in queue-clock seconds)."""
    found: dict[str, Any] = to_json(info)
    return found


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    """An AuditEntry as plain JSON values."""
    found: dict[str, Any] = to_json(entry)
    return found


def when(seconds: float | None) -> str:
    """A queue-clock time for people: UTC ISO-8601 to the millisecond, '-' for none."""
    if seconds is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Left-aligned columns under upper-case headers, for people to read."""
    cells = [[str(h).upper() for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
