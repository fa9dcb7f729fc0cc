"""`fairq demo`: the short fair-relay story (see fairq.demo)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run a short fair-relay scenario and tell what happened")
    p.add_argument("--keep-in", metavar="DIR",
                   help="run in this new or empty folder and keep its databases (default: a temporary folder)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo import main_demo

    return main_demo(args.keep_in)
