"""Subcommands that decide about an event: redrive."""

from __future__ import annotations

import argparse

from ._common import EXIT_OK, open_existing, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("redrive", help="give a quarantined event a new round (audited)")
    p.add_argument("event_id", metavar="ID")
    p.add_argument("--expected-generation", type=int, required=True, metavar="N",
                   help="the generation `fairq show ID` reports; refused if the event has moved on")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why, for the audit trail")
    p.add_argument("--actor", metavar="NAME", help="who decided, for the audit trail")
    p.set_defaults(func=redrive)


def redrive(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        generation = q.redrive(args.event_id, expected_generation=args.expected_generation,
                               reason=args.reason, actor=args.actor)
    print_json({"event_id": args.event_id, "generation": generation})
    return EXIT_OK
