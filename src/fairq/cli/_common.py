"""What every subcommand shares: the database path or server URL, exit codes, output helpers."""

from __future__ import annotations

import argparse
import datetime
import json
import os
from collections.abc import Sequence
from typing import Any

from ..errors import FairqError
from .._json import to_json
from ..http.client import Client
from ..stores import names_server, stored_clock
from ..stores import shown as shown  # the target for messages: one rule for every command
from ..api.queue import Queue
from ..types import AuditEntry, EventInfo, Stats

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2  # argparse's own exit status for usage errors
EXIT_INTERRUPTED = 130  # 128 + SIGINT: stopped by Ctrl-C
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`)


#: Commands that run against a server given by --url or $FAIRQ_URL (through open_target).
REMOTE_COMMANDS = frozenset({"status", "events", "show", "explain", "redrive", "discard", "pause", "resume",
                             "set-weight", "tenants", "set-tenant", "metrics", "work", "enqueue"})


def audit_args(p: argparse.ArgumentParser, *, reason_required: bool = True) -> None:
    """The --reason and --actor of a command an operator decides (kept in the audit row)."""
    p.add_argument("--reason", required=reason_required, metavar="TEXT", help="why, for the audit trail")
    p.add_argument("--actor", metavar="NAME", help="who decided, for the audit trail")


def server_url(args: argparse.Namespace) -> str | None:
    """--url, else $FAIRQ_URL unless --db is given; None: the commands work on a local file."""
    if getattr(args, "url", None):
        return str(args.url)
    if args.db:
        return None
    return os.environ.get("FAIRQ_URL") or None


def target_problem(args: argparse.Namespace) -> str | None:
    """Why the chosen target cannot serve this command (a usage error), or None."""
    if getattr(args, "url", None) and args.db:
        return "give --url (a server) or --db (a file), not both"
    url = server_url(args)
    remote = args.command in REMOTE_COMMANDS and not (args.command == "enqueue" and args.file is not None)
    if url is None or remote:  # `enqueue FILE` reads a file on this host: only one event goes to a server
        return None
    if args.command in ("serve", "ui") and not getattr(args, "url", None):
        return None  # a server reads its own file; $FAIRQ_URL is for its clients
    what = "enqueue FILE" if args.command == "enqueue" else args.command
    return (f"fairq {what} does not run against a server ({url}); run it on the server's host "
            f"with --db, or unset FAIRQ_URL. Against a server: {', '.join(sorted(REMOTE_COMMANDS))}")


def open_target(args: argparse.Namespace, **settings: Any) -> Queue | Client:
    """The queue a command works on: a Client for the server at --url or $FAIRQ_URL
    (token from $FAIRQ_TOKEN, so it never shows in a process listing), else the
    existing local file (opened with Queue `settings`)."""
    url = server_url(args)
    return open_existing(args, **settings) if url is None else _client(url, settings)


def database_path(args: argparse.Namespace | str | None = None) -> str:
    """The database every command and example uses: --db (parsed `args`, or
    the option's value as a string), else $FAIRQ_DB, else ./fairq.db. A
    postgresql:// (or postgres://) URL names a PostgreSQL database."""
    given = getattr(args, "db", None) if isinstance(args, argparse.Namespace) else args
    return given or os.environ.get("FAIRQ_DB") or "fairq.db"


def queue_clock(path: str) -> dict[str, Any]:
    """The Queue setting for the clock the queue at `path` runs at: a PostgreSQL
    queue's stored clock, so a command measures leases as its workers do ({} for
    a file, the server clock, or where there is no queue yet)."""
    return {"clock": "model"} if stored_clock(path) == "model" else {}


def open_existing(args: argparse.Namespace, **settings: Any) -> Queue:
    """The queue at the chosen path (opened with Queue `settings`); refuses
    to create one where there is none (in a PostgreSQL database: where the
    queue's tables were never created)."""
    path = database_path(args)
    if names_server(path):  # a server's URL names no file: no existence checks apply
        clock = queue_clock(path)
        Queue(path, readonly=True, **clock).close()  # SchemaError when no queue is there: nothing is created
        return Queue(path, **clock, **settings)
    if not os.path.exists(path):
        raise FairqError(f"no fairq database at {path} (set --db or FAIRQ_DB, or run fairq init)")
    if os.path.isdir(path):
        raise FairqError(f"{path} is a directory, not a fairq database (set --db or FAIRQ_DB)")
    return Queue(path, **settings)


def open_to_read(args: argparse.Namespace) -> Queue:
    """The queue at the chosen path, opened read-only: never creates, upgrades
    or writes the file; refuses a missing, empty, foreign or older one."""
    path = database_path(args)
    if not names_server(path) and os.path.isdir(path):
        raise FairqError(f"{path} is a directory, not a fairq database (set --db or FAIRQ_DB)")
    return Queue(path, readonly=True, **queue_clock(path))


def read_target(args: argparse.Namespace) -> Queue | Client:
    """What a looking command reads: a Client for the server at --url or
    $FAIRQ_URL, else the local file opened read-only (see open_to_read)."""
    url = server_url(args)
    return open_to_read(args) if url is None else _client(url, {})


def _client(url: str, settings: dict[str, Any]) -> Client:
    """A Client for the server at `url`; its token comes from $FAIRQ_TOKEN (the
    Client's default), never from the command line. Of the Queue settings a
    Client takes only lease_seconds."""
    return Client(url, **{k: settings[k] for k in ("lease_seconds",) if k in settings})


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
