"""Subcommands for the queue's stored clock: `fairq clock reset` moves it back
after a mistaken future time (audited)."""

from __future__ import annotations

import argparse

from .._json import to_json
from ._common import audit_args, EXIT_OK, open_existing, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("clock", help="the queue's stored clock: reset it after a mistaken future time")
    verbs = p.add_subparsers(dest="clock_command", metavar="VERB")
    verbs.required = True
    r = verbs.add_parser("reset", help="move the stored clock (and leases, backoffs) back to the system clock")
    audit_args(r)
    r.add_argument("--to", type=float, metavar="SECONDS",
                   help="the Unix time to move it back to (default: the system clock now)")
    r.set_defaults(func=reset)


def reset(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        done = q.reset_clock(reason=args.reason, actor=args.actor, to=args.to)
    print_json(to_json(done))
    return EXIT_OK
