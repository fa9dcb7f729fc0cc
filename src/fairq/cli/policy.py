"""Subcommands for the queue's stored retry policy: `fairq policy show` prints
it, `fairq policy set` changes it for every process (audited)."""

from __future__ import annotations

import argparse

from ..errors import InvalidInput
from ..kernel.policy import policy_json
from ._common import audit_args, EXIT_OK, open_existing, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("policy", help="the retry policy stored in the queue: show it, change it (audited)")
    verbs = p.add_subparsers(dest="policy_command", metavar="VERB")
    verbs.required = True
    s = verbs.add_parser("show", help="print the stored policy as JSON")
    s.set_defaults(func=show)
    c = verbs.add_parser("set", help="change the stored policy for every process, from its next call")
    c.add_argument("--max-attempts", type=int, metavar="N", help="claims per round before quarantine")
    c.add_argument("--lease-seconds", type=float, metavar="S", help="a claim's lease when it names none")
    c.add_argument("--backoff-base", type=float, metavar="S", help="the first retry delay")
    c.add_argument("--backoff-factor", type=float, metavar="X", help="how much each further delay grows")
    c.add_argument("--backoff-cap", type=float, metavar="S", help="the longest retry delay")
    c.add_argument("--backoff-jitter", choices=("on", "off"), help="spread retries of different events")
    audit_args(c)
    c.set_defaults(func=set_)


def show(args: argparse.Namespace) -> int:
    with open_existing(args) as q:
        print_json(policy_json(q.policy()))
    return EXIT_OK


def set_(args: argparse.Namespace) -> int:
    changes: dict[str, object] = {name: getattr(args, f"backoff_{name}") for name in ("base", "factor", "cap")
                                  if getattr(args, f"backoff_{name}") is not None}
    if args.backoff_jitter is not None:
        changes["jitter"] = args.backoff_jitter == "on"
    with open_existing(args) as q:
        try:
            # Only the fields given: set_policy merges them with the backoff stored
            # when it writes, so a change made meanwhile to another field is kept.
            done = q.set_policy(max_attempts=args.max_attempts, lease_seconds=args.lease_seconds,
                                backoff=changes or None, reason=args.reason, actor=args.actor)
        except InvalidInput as exc:
            if exc.field.startswith("backoff."):  # named by its option
                raise InvalidInput("--" + exc.field.replace(".", "-"), exc.problem) from None
            raise
        print_json(policy_json(done))
    return EXIT_OK
