"""`fairq serve`: the queue over HTTP (fairq.http.server) until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from ..errors import FairqError
from ..http.server import (
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_HOST,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_PORT,
    Server,
)
from ..queue import Queue
from ._common import EXIT_OK, database_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the queue over HTTP to remote workers (bearer token required)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--token-file", metavar="PATH", help="file holding the bearer token (default: $FAIRQ_TOKEN)")
    p.add_argument("--no-auth", action="store_true", help="serve without a token (loopback addresses only)")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES, metavar="BYTES",
                   help=f"largest HTTP request body accepted (default {DEFAULT_MAX_REQUEST_BYTES})")
    p.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help=f"connections served at once; more wait to be accepted (default {DEFAULT_MAX_CONNECTIONS})")
    p.add_argument("--drain-seconds", type=float, default=DEFAULT_DRAIN_SECONDS, metavar="S",
                   help=f"on SIGINT/SIGTERM, how long requests in flight may finish (default {DEFAULT_DRAIN_SECONDS:g})")
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    token = None if args.no_auth else _token(args)
    path = database_path(args)
    with Queue(path) as queue:
        try:
            server = Server(queue, token=token, host=args.host, port=args.port,
                            max_request_bytes=args.max_request_bytes, max_connections=args.max_connections,
                            drain_seconds=args.drain_seconds)
        except (OSError, OverflowError) as exc:  # OverflowError: a port outside 0-65535
            reason = getattr(exc, "strerror", None) or exc
            raise FairqError(f"cannot listen on {args.host}:{args.port}: {reason}") from exc
        # Leaving this block closes the server first, which waits for every
        # request thread, and only then the Queue they share.
        with server:
            for signum in (signal.SIGINT, signal.SIGTERM):
                # shutdown() waits for serve_forever() to stop, so it runs on another thread.
                signal.signal(signum, lambda *_: threading.Thread(target=server.shutdown).start())
            if token is None:
                print("fairq: authentication is off (--no-auth)", file=sys.stderr)
            print(f"fairq: serving {path} at {server.url}", flush=True)
            server.serve_forever()
            print("fairq: stopping: finishing the requests in flight", file=sys.stderr, flush=True)
    print("fairq: stopped", file=sys.stderr)
    return EXIT_OK


def _token(args: argparse.Namespace) -> str:
    """The token from --token-file, else $FAIRQ_TOKEN; refuses to go on without one."""
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise FairqError(f"cannot read the token file {args.token_file}: {exc}") from exc
        source = args.token_file
    else:
        token = os.environ.get("FAIRQ_TOKEN", "").strip()
        source = "FAIRQ_TOKEN"
    if not token:
        raise FairqError(f"no token in {source}: give --token-file or set FAIRQ_TOKEN "
                         "(or --no-auth on a loopback address)")
    return token
