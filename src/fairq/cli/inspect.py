"""Subcommands that look at a queue: status, events, show. They never write."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import FairqError
from ..limits import MAX_EVENTS_LISTED
from ..types import State
from ._common import (
    EXIT_OK,
    audit_json,
    event_json,
    read_target,
    print_json,
    print_table,
    stats_json,
    when,
)

REASON_WIDTH = 60  # characters of a reason shown in the events table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="claimable now, blocked flows, counts by state, flows, oldest ready age, claim lag, backlogs")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=status)

    p = sub.add_parser("events", help="list events, filtered by state, flow and/or kind")
    p.add_argument("--state", choices=[s.value for s in State], help="only events in this state")
    p.add_argument("--flow", help="only this flow's events, in seq order")
    p.add_argument("--kind", help="only events of this kind (a task name)")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="at most N events (default 100)")
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
    p.set_defaults(func=events)

    p = sub.add_parser("show", help="everything about one event, with its audit trail")
    p.add_argument("event_id", metavar="ID")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=show)


def status(args: argparse.Namespace) -> int:
    with read_target(args) as q:
        stats = q.stats()
    if args.json:
        print_json(stats_json(stats))
        return EXIT_OK
    print(f"claimable now     {stats.claimable_now}")
    print(f"blocked flows     {stats.blocked_flows}  (head quarantined or flow paused: fairq explain FLOW)")
    for state, n in stats.counts.items():
        print(f"{state:<16}  {n}")
    print(f"flows             {stats.flows}  (with an event not yet acked or discarded)")
    print(f"oldest ready age  {stats.oldest_ready_age:.3f}s")
    if stats.claim_lag_median is not None:
        print(f"claim lag         median <= {stats.claim_lag_median}s, p99 <= {stats.claim_lag_p99}s")
    if stats.totals:
        print("totals            " + ", ".join(f"{name} {n}" for name, n in stats.totals.items()))
    for flow, backlog in stats.top_flows:
        print(f"  flow {flow}: {backlog} unacked")
    return EXIT_OK


def events(args: argparse.Namespace) -> int:
    # One more than asked tells whether the listing is cut (an invalid --limit goes through as given).
    probe = args.limit + 1 if 1 <= args.limit < MAX_EVENTS_LISTED else args.limit
    with read_target(args) as q:
        kind = {} if args.kind is None else {"kind": args.kind}
        found = q.events(state=args.state, flow=args.flow, limit=probe, **kind)
        if len(found) > args.limit:
            found = found[: args.limit]
            _note_cut(len(found), None if args.flow or kind else _matching(q.stats(top=0).counts, args.state))
    if args.json:
        print_json([event_json(e) for e in found])
        return EXIT_OK
    # A kind column only when a listed event has a kind.
    kinds = any(e.kind is not None for e in found)
    print_table(
        ["event_id", "flow", *(["kind"] if kinds else []), "seq", "state", "generation", "attempts", "next_at",
         "lease_until", "reason"],
        [[e.event_id, e.flow, *([e.kind] if kinds else []), e.seq, e.state.value, e.generation, e.attempts,
          when(e.next_at), when(e.lease_until), _short(e.reason)] for e in found],
    )
    return EXIT_OK


def show(args: argparse.Namespace) -> int:
    with read_target(args) as q:
        info = q.get(args.event_id)
        if info is None:
            purged = q.stats(top=0).tombstones > 0
            raise FairqError(f"no event {args.event_id!r}" + (
                "; if it was purged, only a tombstone of its id remains (its body and audit trail are gone)"
                if purged else ""))
        trail = q.audit(args.event_id)
    if args.json:
        print_json({"event": event_json(info), "audit": [audit_json(a) for a in trail]})
        return EXIT_OK
    for name, value in event_json(info).items():
        if name == "body":
            value = json.dumps(value, sort_keys=True, ensure_ascii=False)
        elif name.endswith("_at") or name == "lease_until":
            value = when(value)
        print(f"{name:<18} {'-' if value is None else value}")
    if trail:
        print("audit:")
        print_table(["at", "action", "generation", "actor", "reason"],
                    [[when(a.at), a.action, a.generation, a.actor, a.reason] for a in trail])
    return EXIT_OK


def _matching(counts: dict[str, int], state: str | None) -> int:
    return counts.get(state, 0) if state else sum(counts.values())


def _note_cut(shown: int, total: int | None) -> None:
    """Say on stderr that the listing stops at --limit (stdout stays one table or one JSON array)."""
    of = f"{shown} of {total}" if total is not None else f"the first {shown}"
    print(f"fairq: showing {of} events; use --limit N (at most {MAX_EVENTS_LISTED}) or --state/--flow/--kind to see others",
          file=sys.stderr)


def _short(text: str | None) -> str | None:
    if text is None or len(text) <= REASON_WIDTH:
        return text
    return text[: REASON_WIDTH - 1] + "…"
