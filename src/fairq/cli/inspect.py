"""Subcommands that look at a queue: status."""

from __future__ import annotations

import argparse

from ._common import EXIT_OK, open_existing, print_json, stats_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="counts by state, flows, oldest ready age, claim lag, backlogs")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=status)


def status(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        stats = q.stats()
    if args.json:
        print_json(stats_json(stats))
        return EXIT_OK
    width = max(len(k) for k in stats.counts)
    for state, n in stats.counts.items():
        print(f"{state:<{width}}  {n}")
    print(f"{'flows':<{width}}  {stats.flows}")
    print(f"oldest ready age  {stats.oldest_ready_age:.3f}s")
    if stats.claim_lag_median is not None:
        print(f"claim lag         median <= {stats.claim_lag_median}s, p99 <= {stats.claim_lag_p99}s")
    for flow, backlog in stats.top_flows:
        print(f"  flow {flow}: {backlog} unacked")
    return EXIT_OK
