"""Subcommands that fill a queue: init, enqueue FILE|-."""

from __future__ import annotations

import argparse
import sys

from .. import ingest
from ..errors import FairqError
from ..api.queue import Queue
from ..limits import INGEST_MAX_BYTES, INGEST_MAX_LINES
from ._common import EXIT_OK, EXIT_REFUSED, database_path, open_existing, print_json, queue_clock, shown


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="create the database (or check an existing one); safe to repeat")
    p.set_defaults(func=init)

    p = sub.add_parser("enqueue", help="store every event of a JSONL file in one transaction, or none")
    p.add_argument("file", metavar="FILE", help="a JSONL file, or - for standard input")
    p.add_argument("--max-bytes", type=int, default=INGEST_MAX_BYTES, metavar="N",
                   help=f"largest file accepted (default {INGEST_MAX_BYTES})")
    p.add_argument("--max-lines", type=int, default=INGEST_MAX_LINES, metavar="N",
                   help=f"most non-blank lines accepted (default {INGEST_MAX_LINES})")
    p.add_argument("--max-line-bytes", type=int, metavar="N",
                   help=f"longest line accepted (default: the body limit + {ingest.ENVELOPE_BYTES})")
    p.add_argument("--max-body-bytes", type=int, metavar="N",
                   help="largest body accepted, as canonical JSON (default: the queue's limit)")
    p.add_argument("--id-pattern", metavar="REGEX", help="every event_id must match this regular expression")
    p.set_defaults(func=enqueue)


def init(args: argparse.Namespace) -> int:
    path = database_path(args)
    Queue(path, **queue_clock(path)).close()  # creates the file or its fairq tables; refuses a foreign or newer file
    print(f"fairq database ready: {shown(path)}")
    return EXIT_OK


def enqueue(args: argparse.Namespace) -> int:
    source = sys.stdin.buffer if args.file == "-" else args.file
    label = "stdin" if args.file == "-" else args.file
    with open_existing(args) as q:
        try:
            done = q.ingest(source, max_bytes=args.max_bytes, max_lines=args.max_lines,
                            max_line_bytes=args.max_line_bytes, max_body_bytes=args.max_body_bytes,
                            id_pattern=args.id_pattern, summary=True)
        except FairqError as exc:
            print(f"fairq: {label}: {exc}; nothing from the file was stored", file=sys.stderr)
            return EXIT_REFUSED
    print_json({"lines": done.lines, "created": done.created, "duplicates": done.duplicates})
    return EXIT_OK
