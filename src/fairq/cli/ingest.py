"""Subcommands that fill a queue: init, enqueue FILE|- (a JSONL file, local only)
or enqueue --id ID --flow F --body JSON (one event, local or with --url)."""

from __future__ import annotations

import argparse
import json
import sys

from .. import ingest
from ..errors import FairqError, InvalidInput
from ..api.queue import Queue
from ..limits import INGEST_MAX_BYTES, INGEST_MAX_LINES
from .._json import to_json
from ._common import (EXIT_OK, EXIT_REFUSED, database_path, open_existing, open_target, print_json, queue_clock,
                      shown)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="create the database (or check an existing one); safe to repeat")
    p.set_defaults(func=init)

    p = sub.add_parser("enqueue", help="store one event (--id, --body), or every event of a JSONL file "
                       "in one transaction, or none")
    p.add_argument("file", metavar="FILE", nargs="?", help="a JSONL file, or - for standard input")
    one = p.add_argument_group("one event (instead of FILE; also with --url)")
    one.add_argument("--id", dest="event_id", metavar="ID", help="the event's id")
    one.add_argument("--body", metavar="JSON", help="the event's body, a JSON value")
    one.add_argument("--flow", metavar="FLOW", help="its flow (default: a flow of its own)")
    one.add_argument("--tenant", metavar="NAME", help="the tenant its flow belongs to")
    one.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="claimable this many seconds from now")
    one.add_argument("--kind", metavar="NAME", help="its kind: the name of the task that handles it")
    one.add_argument("--max-attempts", type=int, metavar="N",
                     help="its own retry budget (default: the queue's stored policy)")
    one.add_argument("--timeout", type=float, metavar="SECONDS",
                     help="how long its handler may run (default: the worker's own timeout)")
    p.add_argument("--max-bytes", type=int, default=INGEST_MAX_BYTES, metavar="N",
                   help=f"largest file accepted (default {INGEST_MAX_BYTES})")
    p.add_argument("--max-lines", type=int, default=INGEST_MAX_LINES, metavar="N",
                   help=f"most non-blank lines accepted (default {INGEST_MAX_LINES})")
    p.add_argument("--max-line-bytes", type=int, metavar="N",
                   help=f"longest line accepted (default: the body limit + {ingest.ENVELOPE_BYTES})")
    p.add_argument("--max-body-bytes", type=int, metavar="N",
                   help="largest body accepted, as canonical JSON (default: the queue's limit)")
    p.add_argument("--id-pattern", metavar="REGEX", help="every event_id must match this regular expression")
    p.set_defaults(func=enqueue, check=enqueue_problem)


def init(args: argparse.Namespace) -> int:
    path = database_path(args)
    Queue(path, **queue_clock(path)).close()  # creates the file or its fairq tables; refuses a foreign or newer file
    print(f"fairq database ready: {shown(path)}")
    return EXIT_OK


def enqueue_problem(args: argparse.Namespace) -> str | None:
    """Why these enqueue arguments are a usage error: FILE and the one-event options, or neither."""
    one_event = [name for name in ("event_id", "body", "flow", "tenant", "kind", "max_attempts", "timeout")
                 if getattr(args, name) is not None]
    if args.file is not None and (one_event or args.delay):
        return "fairq enqueue: give FILE (a JSONL file) or --id and --body (one event), not both"
    if args.file is None and (args.event_id is None or args.body is None):
        return "fairq enqueue: give FILE (a JSONL file, - for stdin), or --id ID and --body JSON for one event"
    return None


def enqueue(args: argparse.Namespace) -> int:
    if args.file is None:
        return _enqueue_one(args)
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


def _enqueue_one(args: argparse.Namespace) -> int:
    """One event from --id, --body (JSON), --flow, --tenant, --delay, --kind, --max-attempts, --timeout."""
    try:
        body = json.loads(args.body)
    except ValueError as exc:
        raise InvalidInput("--body", f"is not JSON ({exc}); quote it for the shell, e.g. --body '{{\"n\": 1}}'") from exc
    with open_target(args) as q:
        task = {name: getattr(args, name) for name in ("kind", "max_attempts", "timeout")
                if getattr(args, name) is not None}
        done = q.enqueue(args.event_id, body, flow=args.flow, tenant=args.tenant, delay=args.delay, **task)
    print_json(to_json(done))
    return EXIT_OK
