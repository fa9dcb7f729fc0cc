"""Subcommands for periodic schedules: `fairq tick` and `fairq schedules ACTION`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._json import StrictJSONError, loads_strict
from ..errors import InvalidInput, UnknownSchedule
from .._json import to_json
from ..kernel.policy import to_ms
from ..api.queue import Queue
from ..types import Misfire, Schedule, slot_text
from ._common import EXIT_OK, EXIT_REFUSED, database_path, open_existing, open_to_read, print_json, queue_clock


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tick", help="turn every due schedule slot into an event (or a recorded misfire)")
    p.add_argument("--now", type=float, metavar="SECONDS",
                   help="tick at this queue-clock time (Unix seconds); default: the wall clock")
    p.add_argument("--ahead", type=float, default=0.0, metavar="SECONDS",
                   help="also expand slots up to this many seconds ahead (claimable at their slot)")
    p.add_argument("--json", action="store_true", help="one JSON array of the instances on stdout")
    p.set_defaults(func=tick)

    p = sub.add_parser("schedules", help="periodic schedules: add, list, remove, pause, resume")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    a = actions.add_parser("add", help="create a schedule (again with the same definition: no change)")
    a.add_argument("name")
    kind = a.add_mutually_exclusive_group(required=True)
    kind.add_argument("--every", type=float, metavar="SECONDS", help="seconds between slots, from --start")
    kind.add_argument("--cron", metavar="EXPR", help="5-field cron expression or @hourly-style macro")
    a.add_argument("--tz", default="UTC", help="IANA time zone the cron fields are read in (default UTC)")
    a.add_argument("--body", metavar="JSON", help="JSON every instance carries (default null)")
    lane = a.add_mutually_exclusive_group()
    lane.add_argument("--flow", help="flow of the instances (default: the schedule's name)")
    lane.add_argument("--overlap", action="store_true", help="each instance a flow of its own")
    a.add_argument("--start", type=float, metavar="SECONDS", help="first slot (Unix seconds); default: now")
    a.add_argument("--misfire", choices=[m.value for m in Misfire], default=Misfire.COALESCE.value)
    a.add_argument("--grace", type=float, metavar="SECONDS",
                   help="how late a due slot may be found and still run (coalesce, skip)")
    a.add_argument("--json", action="store_true", help="print the schedule as JSON")
    a.set_defaults(func=add)

    ls = actions.add_parser("list", help="every schedule with its next slot")
    ls.add_argument("--json", action="store_true", help="one JSON array on stdout")
    ls.set_defaults(func=list_schedules)

    for name, helptext in (("remove", "delete a schedule (its instances stay)"),
                           ("pause", "hold a schedule's expansion"),
                           ("resume", "expand a paused schedule again, from where it stopped")):
        c = actions.add_parser(name, help=helptext)
        c.add_argument("name")
        c.set_defaults(func=change)


def tick(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        created = q.tick(now=args.now, ahead=args.ahead)
    if args.json:
        print_json([{"event_id": e.event_id, "flow": e.flow, "seq": e.seq, "created": e.created}
                    for e in created])
        return EXIT_OK
    for e in created:
        print(f"{'created' if e.created else 'exists '} {e.event_id}")
    print(f"{sum(e.created for e in created)} instances created")
    return EXIT_OK


def add(args: argparse.Namespace) -> int:
    body = None if args.body is None else _json_argument(args.body, "body")
    path = database_path(args)
    with Queue(path, **queue_clock(path)) as q:
        schedule = q.schedules.add(
            args.name, every=args.every, cron=args.cron, tz=args.tz, body=body, flow=args.flow,
            overlap=args.overlap, start=args.start, misfire=args.misfire, grace=args.grace,
        )
    _show([schedule], as_json=args.json, one=True)
    return EXIT_OK


def list_schedules(args: argparse.Namespace) -> int:
    with open_to_read(args) as q:
        schedules = q.schedules.list()
    _show(schedules, as_json=args.json)
    return EXIT_OK


def change(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        if args.action == "remove":
            try:
                q.schedules.remove(args.name)
            except UnknownSchedule:
                print(f"fairq: no schedule is called {args.name!r}", file=sys.stderr)
                return EXIT_REFUSED
            print(f"removed {args.name}")
            return EXIT_OK
        schedule = q.schedules.pause(args.name) if args.action == "pause" else q.schedules.resume(args.name)
    _show([schedule], as_json=False)
    return EXIT_OK


def schedule_json(s: Schedule) -> dict[str, Any]:
    """A Schedule in its wire form, plus the next slot as UTC ISO-8601 text."""
    return {**to_json(s), "next_slot_utc": None if s.next_slot is None else slot_text(to_ms(s.next_slot))}


def _show(schedules: list[Schedule], *, as_json: bool, one: bool = False) -> None:
    if as_json:
        print_json(schedule_json(schedules[0]) if one else [schedule_json(s) for s in schedules])
        return
    for s in schedules:
        when = f"every {s.every:g}s" if s.every is not None else f"cron {s.cron!r} {s.tz}"
        nxt = "none left" if s.next_slot is None else slot_text(to_ms(s.next_slot))
        lane = "own flow per slot" if s.flow is None else f"flow {s.flow}"
        grace = "" if s.grace is None else f" grace {s.grace:g}s"
        paused = "  PAUSED" if s.paused else ""
        print(f"{s.name}  {when}  misfire {s.misfire.value}{grace}  {lane}  next {nxt}{paused}")


def _json_argument(text: str, field: str) -> Any:
    """A JSON command-line argument, read strictly (no NaN, no duplicate keys)."""
    try:
        return loads_strict(text)
    except StrictJSONError as exc:
        raise InvalidInput(f"{field}.{exc.path}" if exc.path else field, exc.problem) from None