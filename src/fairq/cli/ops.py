"""Subcommands for operators: redrive a quarantined event, discard an event,
pause and resume a flow, set a flow's weight, explain a stuck flow, export
metrics, purge old acked events."""

from __future__ import annotations

import argparse
import dataclasses
import re
import time

from ..errors import InvalidInput
from ..metrics import every_tenant, exposition
from ..limits import DEDUP_WINDOW
from ._common import audit_args, EXIT_OK, EXIT_REFUSED, open_existing, open_target, read_target, print_json

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("redrive", help="give a quarantined event a new round (audited)")
    p.add_argument("event_id", metavar="ID")
    p.add_argument("--expected-generation", type=int, required=True, metavar="N",
                   help="the generation `fairq show ID` reports; refused if the event has moved on")
    audit_args(p)
    p.set_defaults(func=redrive)

    p = sub.add_parser("discard", help="settle a ready or quarantined event as discarded: its flow moves on (audited)")
    p.add_argument("event_id", metavar="ID")
    p.add_argument("--expected-generation", type=int, required=True, metavar="N",
                   help="the generation `fairq show ID` reports; refused if the event has moved on")
    audit_args(p)
    p.set_defaults(func=discard)

    p = sub.add_parser("pause", help="stop claims of a flow's head until resume (audited)")
    p.add_argument("flow", metavar="FLOW")
    audit_args(p)
    p.set_defaults(func=pause)

    p = sub.add_parser("resume", help="let a paused flow's head be claimed again (audited)")
    p.add_argument("flow", metavar="FLOW")
    audit_args(p, reason_required=False)
    p.set_defaults(func=resume)

    p = sub.add_parser("set-weight", help="give a flow WEIGHT claims per rotation round (1 to 1000)")
    p.add_argument("flow", metavar="FLOW")
    p.add_argument("weight", type=int, metavar="WEIGHT", help="claims per round relative to other busy flows")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (the default output too)")
    p.set_defaults(func=set_weight)

    p = sub.add_parser("explain", help="say in one answer why a flow is not moving")
    p.add_argument("flow", metavar="FLOW")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=explain)

    p = sub.add_parser("metrics", help="print the queue's metrics in Prometheus text format")
    p.add_argument("--top", type=int, default=10, metavar="N", help="flows with the largest backlog to list")
    p.set_defaults(func=metrics)

    p = sub.add_parser("purge", help="remove old acked events, keeping tombstones of their ids")
    p.add_argument("--older-than", required=True, type=duration, metavar="DURATION",
                   help="purge events acked longer ago than this (e.g. 3600, 90m, 12h, 7d)")
    keep = p.add_mutually_exclusive_group()
    keep.add_argument("--dedup-window", type=duration, default=DEDUP_WINDOW, metavar="DURATION",
                      help="forget tombstones of events acked longer ago than this (default 30d)")
    keep.add_argument("--keep-tombstones", action="store_true", help="never forget a tombstone")
    p.set_defaults(func=purge)


def redrive(args: argparse.Namespace) -> int:
    with open_target(args) as q:
        generation = q.redrive(args.event_id, expected_generation=args.expected_generation,
                               reason=args.reason, actor=args.actor)
    print_json({"event_id": args.event_id, "generation": generation})
    return EXIT_OK


def discard(args: argparse.Namespace) -> int:
    with open_target(args) as q:
        generation = q.discard(args.event_id, expected_generation=args.expected_generation,
                               reason=args.reason, actor=args.actor)
    print_json({"event_id": args.event_id, "generation": generation, "state": "discarded"})
    return EXIT_OK


def pause(args: argparse.Namespace) -> int:
    with open_target(args) as q:
        q.pause(args.flow, reason=args.reason, actor=args.actor)
    print_json({"flow": args.flow, "paused": True})
    return EXIT_OK


def resume(args: argparse.Namespace) -> int:
    with open_target(args) as q:
        q.resume(args.flow, reason=args.reason, actor=args.actor)
    print_json({"flow": args.flow, "paused": False})
    return EXIT_OK


def set_weight(args: argparse.Namespace) -> int:
    with open_target(args) as q:
        q.set_weight(args.flow, args.weight)
    print_json({"flow": args.flow, "weight": args.weight})
    return EXIT_OK


def duration(text: str) -> float:
    """Seconds from '90', '90s', '15m', '12h' or '7d'."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 90, 15m, 12h or 7d")
    return float(found.group(1)) * _UNITS[found.group(2)]


def explain(args: argparse.Namespace) -> int:
    with read_target(args) as q:
        blocked = q.why_blocked(args.flow)
    if args.json:
        print_json({**dataclasses.asdict(blocked), "answer": str(blocked)})
    else:
        print(blocked)
    # An unknown flow is most often a mistyped name: the answer is printed, and the status says so.
    return EXIT_REFUSED if blocked.why == "unknown" else EXIT_OK


def metrics(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise InvalidInput("--top", f"must be >= 0, got {args.top}")
    with read_target(args) as q:
        stats = q.stats(top=args.top)
        text = exposition(stats, every_tenant(q))
    print(text, end="")
    return EXIT_OK


def purge(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        done = q.purge(acked_before=max(0.0, time.time() - args.older_than),
                       dedup_window=None if args.keep_tombstones else args.dedup_window)
    print(f"purged {done.events} acked events (tombstones kept); forgot {done.tombstones_dropped} tombstones")
    return EXIT_OK
