"""Subcommands for tenants: list them with what holds them back (`fairq tenants`),
set a tenant's weight and limits (`fairq set-tenant`, audited). On a local file or,
with --url, on a `fairq serve`."""

from __future__ import annotations

import argparse
import sys

from .._json import to_json
from ..limits import MAX_FLOWS_LISTED
from ..types import TenantInfo
from ._common import audit_args, EXIT_OK, open_target, print_json, print_table, read_target, when


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tenants", help="list tenants: weight, limits, leased and ready events, what holds them")
    p.add_argument("--after", metavar="NAME", help="start after this tenant (the last one of the previous page)")
    p.add_argument("--limit", type=int, default=100, metavar="N",
                   help=f"at most N tenants (default 100, at most {MAX_FLOWS_LISTED})")
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
    p.set_defaults(func=tenants)

    p = sub.add_parser("set-tenant", help="set a tenant's weight, max_inflight, rate and burst (audited)")
    p.add_argument("tenant", metavar="NAME")
    p.add_argument("--weight", type=int, metavar="W", help="turns per rotation round among tenants (1 to 1000)")
    p.add_argument("--max-inflight", type=int, metavar="K",
                   help="at most K of its events leased at once, across every worker (0: no limit)")
    p.add_argument("--rate", type=int, metavar="R", help="at most R claims per second on average (0: no limit)")
    p.add_argument("--burst", type=int, metavar="B", help="at most B claims at once (default with a rate: R)")
    audit_args(p, reason_required=False)
    p.set_defaults(func=set_tenant)


def tenants(args: argparse.Namespace) -> int:
    # One more than asked tells whether the listing is cut (an invalid --limit goes through as given).
    probe = args.limit + 1 if 1 <= args.limit < MAX_FLOWS_LISTED else args.limit
    with read_target(args) as q:
        found = q.tenants(after=args.after, limit=probe)
    if len(found) > args.limit:
        found = found[: args.limit]
        print(f"fairq: showing {len(found)} tenants; the next page: --after {found[-1].name}", file=sys.stderr)
    if args.json:
        print_json([to_json(t) for t in found])
        return EXIT_OK
    print_table(["name", "weight", "max_inflight", "rate/burst", "inflight", "ready", "flows", "tokens",
                 "limited_by", "until"], [_row(t) for t in found])
    return EXIT_OK


def _row(t: TenantInfo) -> list[object]:
    """One tenant for people: a limit of 0 (none) shows as '-'."""
    return [t.name, t.weight, t.max_inflight or None, f"{t.rate}/{t.burst}" if t.rate else None,
            t.inflight, t.ready, t.flows, None if t.tokens is None else f"{t.tokens:g}",
            t.limited_by, when(t.until)]


def set_tenant(args: argparse.Namespace) -> int:
    with open_target(args) as q:
        info = q.set_tenant(args.tenant, weight=args.weight, max_inflight=args.max_inflight, rate=args.rate,
                            burst=args.burst, reason=args.reason, actor=args.actor)
    print_json(to_json(info))
    return EXIT_OK
