"""The fairq command line: argparse in, text or JSON out. No SQL, no policy.

Each area's subcommands live in their own module with a ``register(sub)``
function; this module only assembles them and maps errors to exit codes.

Database: ``--db`` (before or after the subcommand; after wins when both are
given), else ``$FAIRQ_DB``, else ``./fairq.db`` (see ``database_path``), a
file or a ``postgresql://`` URL; or a
`fairq serve` at ``--url`` (else ``$FAIRQ_URL``) for the commands in
``_common.REMOTE_COMMANDS``.

Exit status: 0 success; 1 refused input or operation, or an error reading
the database (one ``fairq: ...`` line on stderr says why); 2 usage;
130 after Ctrl-C; 141 (128 + SIGPIPE, what a shell reports for ``cat``)
when the reader of stdout went away, e.g. ``fairq events | head -1``.
No traceback reaches the user: an unexpected exception prints one
``fairq: internal error: ...`` line and exits 1; ``FAIRQ_DEBUG=1`` prints
the traceback too.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..errors import FairqError
from . import clock, demo, ingest, inspect, ops, policy, schedules, serve, tenants, ui, work
from ._common import EXIT_INTERRUPTED, EXIT_PIPE_CLOSED, EXIT_REFUSED, database_path, shown, target_problem

__all__ = ["build_parser", "database_path", "main"]

# Every module that adds subcommands; the order is the order of `fairq --help`.
COMMAND_MODULES = (ingest, inspect, ops, tenants, clock, policy, demo, schedules, serve, ui, work)

# Subcommands that never open the database named by --db / $FAIRQ_DB.
WITHOUT_DATABASE = frozenset({"demo"})

DB_HELP = "database file or postgresql:// URL (default: $FAIRQ_DB, else ./fairq.db)"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that keeps its subcommands (`subcommands`, None until
    add_subparsers), so `commands` walks them; argparse makes every child
    parser of the same class."""

    subcommands: argparse._SubParsersAction[argparse.ArgumentParser] | None = None

    def add_subparsers(self, *args: Any, **kwargs: Any) -> Any:
        self.subcommands = super().add_subparsers(*args, **kwargs)
        return self.subcommands


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="fairq", description="Durable, fair, fenced work queues in one SQLite file."
    )
    parser.add_argument("--version", action="version", version=f"fairq {__version__}")
    parser.add_argument("--db", help=DB_HELP)
    parser.add_argument("--url", help="a `fairq serve` to work on instead of a file (default: $FAIRQ_URL; "
                        "token from $FAIRQ_TOKEN)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    for path, command in commands(parser):
        if path[0] in WITHOUT_DATABASE:
            continue
        try:
            # SUPPRESS: when absent after the subcommand, the global --db (or None) stays.
            command.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
        except argparse.ArgumentError:
            pass  # the command has a --db of its own
    return parser


def commands(parser: argparse.ArgumentParser,
             path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable command under `parser` (one build_parser made), as (words, parser):
    ("status",), ("schedules", "add"), ... in the order of --help."""
    found = []
    subcommands = parser.subcommands if isinstance(parser, Parser) else None
    for name, child in (subcommands.choices if subcommands is not None else {}).items():
        found += commands(child, (*path, name)) or [((*path, name), child)]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run one fairq command; returns its exit status (see the module docstring)."""
    try:
        return _run(argv)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE_CLOSED
    except KeyboardInterrupt:
        print("fairq: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        problem = target_problem(args)
        if problem is None and getattr(args, "check", None) is not None:
            problem = args.check(args)  # a command's own usage rule beyond what argparse checks
        if problem is not None:
            parser.error(problem)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except (BrokenPipeError, KeyboardInterrupt):
        raise
    except FairqError as exc:
        return _refused(str(exc))
    except sqlite3.Error as exc:
        return _refused(f"database error in {shown(database_path(args))}: {exc}")
    except OSError as exc:
        return _refused(str(exc))
    except Exception as exc:  # the last resort: one line, never a traceback unless asked
        if os.environ.get("FAIRQ_DEBUG") == "1":
            traceback.print_exc()
        return _refused(f"internal error: {type(exc).__name__}: {exc} (FAIRQ_DEBUG=1 shows the traceback)")


def _refused(message: str) -> int:
    """One line on stderr (a driver's message may span several), exit status 1."""
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"fairq: {message}", file=sys.stderr)
    return EXIT_REFUSED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail
    again (the recipe in the signal module's documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
