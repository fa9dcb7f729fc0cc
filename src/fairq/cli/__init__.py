"""The fairq command line: argparse in, text or JSON out. No SQL, no policy.

Each area's subcommands live in their own module with a ``register(sub)``
function; this module only assembles them and maps errors to exit codes.
Database: --db, else $FAIRQ_DB, else ./fairq.db. Exit status: 0 success,
1 refused input or operation (the message on stderr says why), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import FairqError
from . import clock, demo, ingest, inspect, ops, policy, schedules, serve, work
from ._common import EXIT_REFUSED

# Every module that adds subcommands; the order is the order of `fairq --help`.
COMMAND_MODULES = (ingest, inspect, ops, clock, policy, demo, schedules, serve, work)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairq", description="Durable, fair, fenced work queues in one SQLite file."
    )
    parser.add_argument("--version", action="version", version=f"fairq {__version__}")
    parser.add_argument("--db", help="database file (default: $FAIRQ_DB, else ./fairq.db)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return int(args.func(args))
    except FairqError as exc:
        print(f"fairq: {exc}", file=sys.stderr)
        return EXIT_REFUSED
