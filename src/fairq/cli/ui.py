"""`fairq ui`: the operator console (docs/console.md) for one database file, on loopback.

A shortcut for `fairq serve` that listens on 127.0.0.1 only and serves only
the console's files and the endpoints the console uses: workers cannot
claim through it. The token comes from --token-file, else $FAIRQ_TOKEN, else
a fresh random one printed once on stdout (the console asks for it once per
browser tab). The database must be an existing, current fairq file: a
mistyped path creates nothing. --read-only opens it read-only.
"""

from __future__ import annotations

import argparse
import os
import secrets

from ..http.server import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_SAMPLE_SECONDS,
    check_settings,
)
from ._common import EXIT_OK, open_existing
from .serve import port_number, run, token_from

#: The port `fairq ui` listens on unless told (beside `fairq serve`'s 8765).
DEFAULT_UI_PORT = 8766


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ui", help="serve the operator console for the database on 127.0.0.1")
    p.add_argument("--port", type=port_number, default=DEFAULT_UI_PORT,
                   help=f"port (default {DEFAULT_UI_PORT}; 0 picks a free one)")
    p.add_argument("--token-file", metavar="PATH",
                   help="file holding the bearer token (default: $FAIRQ_TOKEN, else a new one printed at start)")
    p.add_argument("--read-only", action="store_true", help="show the console without any action")
    p.set_defaults(func=ui)


def ui(args: argparse.Namespace) -> int:
    fresh = not args.token_file and not os.environ.get("FAIRQ_TOKEN", "").strip()
    token = secrets.token_urlsafe(24) if fresh else token_from(args)
    settings = dict(token=token, host="127.0.0.1", port=args.port, max_request_bytes=DEFAULT_MAX_REQUEST_BYTES,
                    max_connections=DEFAULT_MAX_CONNECTIONS, drain_seconds=DEFAULT_DRAIN_SECONDS,
                    head_timeout=DEFAULT_HEAD_TIMEOUT, body_timeout=DEFAULT_BODY_TIMEOUT, tick_seconds=None,
                    read_only=args.read_only, console_only=True, sample_seconds=DEFAULT_SAMPLE_SECONDS)
    check_settings(**settings)  # before the database is opened
    notes = ["fairq: read-only (--read-only): the console shows no actions"] if args.read_only else []
    # Only an existing, current fairq file: an empty or foreign one is refused
    # unchanged. A read-only console opens it read-only: it never writes.
    open_existing(args, readonly=True).close()
    with open_existing(args, readonly=args.read_only) as queue:

        def listening(url: str) -> str:
            line = f"fairq: console for {queue.path} at {url}/ui/"
            return line + (f"\nfairq: token (paste it into the console once per tab): {token}" if fresh else "")

        run(queue, settings, notes, listening)
    return EXIT_OK

