"""The fairq command line: argparse in, text or JSON out. No SQL, no policy.

Database: --db, else $FAIRQ_DB, else ./fairq.db. Exit status: 0 success,
1 refused input or operation (the message on stderr says why), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .errors import FairqError
from .queue import Queue

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def database_path(arg: str | None) -> str:
    """--db, else $FAIRQ_DB, else ./fairq.db."""
    return arg or os.environ.get("FAIRQ_DB") or "fairq.db"


def _open_existing(args: argparse.Namespace) -> Queue:
    path = database_path(args.db)
    if not os.path.exists(path):
        raise FairqError(f"no fairq database at {path} (set --db or FAIRQ_DB)")
    return Queue(path)


def cmd_status(args: argparse.Namespace) -> int:
    with _open_existing(args) as q:
        stats = q.stats()
    if args.json:
        print(json.dumps({"counts": stats.counts, "flows": stats.flows,
                          "oldest_ready_age": stats.oldest_ready_age, "now": stats.now},
                         sort_keys=True))
        return EXIT_OK
    width = max(len(k) for k in stats.counts)
    for state, n in stats.counts.items():
        print(f"{state:<{width}}  {n}")
    print(f"{'flows':<{width}}  {stats.flows}")
    print(f"oldest ready age  {stats.oldest_ready_age:.3f}s")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import main_demo

    return main_demo(args.keep_in)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairq", description="Durable, fair, fenced work queues in one SQLite file."
    )
    parser.add_argument("--version", action="version", version=f"fairq {__version__}")
    parser.add_argument("--db", help="database file (default: $FAIRQ_DB, else ./fairq.db)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("status", help="counts by state, flows, oldest ready age")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("demo", help="run a short fair-relay scenario and tell what happened")
    p.add_argument("--keep-in", metavar="DIR",
                   help="run in this new or empty folder and keep its databases (default: a temporary folder)")
    p.set_defaults(func=cmd_demo)
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


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
