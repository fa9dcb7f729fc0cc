"""`fairq serve`: the queue over HTTP (fairq.http.server) until SIGINT or SIGTERM.

Every argument is checked before the database is opened, so a refused start
creates no file.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..errors import FairqError
from ..http.server import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_HOST,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_PORT,
    DEFAULT_SAMPLE_SECONDS,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_TICK_SECONDS,
    Server,
    check_settings,
)
from ..api.queue import Queue
from ._common import EXIT_OK, database_path, queue_clock, shown


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="serve the queue over HTTP to remote workers (bearer token required)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--token-file", metavar="PATH", help="file holding the bearer token (default: $FAIRQ_TOKEN)")
    p.add_argument("--no-auth", action="store_true", help="serve without a token (loopback addresses only)")
    p.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES, metavar="BYTES",
                   help=f"largest HTTP request body accepted (default {DEFAULT_MAX_REQUEST_BYTES})")
    p.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help="connections served at once; one waiting for its request head is closed to make "
                        f"room for a new one (default {DEFAULT_MAX_CONNECTIONS})")
    p.add_argument("--head-timeout", type=float, default=DEFAULT_HEAD_TIMEOUT, metavar="S",
                   help="seconds a connection has to send a request's line and headers, also between "
                        f"requests (default {DEFAULT_HEAD_TIMEOUT:g})")
    p.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT, metavar="S",
                   help=f"seconds a request has to send its body (default {DEFAULT_BODY_TIMEOUT:g})")
    p.add_argument("--send-timeout", type=float, default=DEFAULT_SEND_TIMEOUT, metavar="S",
                   help="seconds a client has to take a whole answer before its connection is closed "
                        f"(default {DEFAULT_SEND_TIMEOUT:g})")
    p.add_argument("--no-tick", action="store_true",
                   help=f"do not tick schedules (by default the server ticks every {DEFAULT_TICK_SECONDS:g} s)")
    p.add_argument("--read-only", action="store_true",
                   help="refuse every request but GET (the console shows no actions); no ticking")
    p.add_argument("--drain-seconds", type=float, default=DEFAULT_DRAIN_SECONDS, metavar="S",
                   help=f"on SIGINT/SIGTERM, how long requests in flight may finish (default {DEFAULT_DRAIN_SECONDS:g})")
    p.set_defaults(func=serve)


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: any free one); an argument error otherwise."""
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return int(text)


def serve(args: argparse.Namespace) -> int:
    token = None if args.no_auth else token_from(args)
    settings = dict(token=token, host=args.host, port=args.port, max_request_bytes=args.max_request_bytes,
                    max_connections=args.max_connections, drain_seconds=args.drain_seconds,
                    head_timeout=args.head_timeout, body_timeout=args.body_timeout, send_timeout=args.send_timeout,
                    tick_seconds=None if args.no_tick else DEFAULT_TICK_SECONDS, read_only=args.read_only,
                    sample_seconds=DEFAULT_SAMPLE_SECONDS)
    check_settings(**settings)  # before the database is opened: a refusal creates nothing
    path = database_path(args)
    notes = ["fairq: authentication is off (--no-auth)"] if token is None else []
    if args.no_tick and not args.read_only:
        notes.append("fairq: not ticking schedules (--no-tick)")
    if args.read_only:
        notes.append("fairq: read-only (--read-only): every request but GET is refused; not ticking")
    with Queue(path, **queue_clock(path)) as queue:
        run(queue, settings, notes, lambda url: f"fairq: serving {shown(path)} at {url}")
    return EXIT_OK


def run(queue: Queue, settings: dict[str, Any], notes: list[str], listening: Callable[[str], str]) -> None:
    """Serve `queue` with Server `settings` until SIGINT or SIGTERM: `notes` go
    to stderr, then `listening(url)` to stdout once it listens."""
    try:
        server = Server(queue, **settings)
    except (OSError, OverflowError) as exc:  # OverflowError: a port outside 0-65535
        reason = getattr(exc, "strerror", None) or exc
        raise FairqError(f"cannot listen on {settings['host']}:{settings['port']}: {reason}") from exc
    # Leaving this block closes the server first, which waits for every
    # request thread, and only then the Queue they share.
    with server:
        for signum in (signal.SIGINT, signal.SIGTERM):
            # shutdown() waits for serve_forever() to stop, so it runs on another thread.
            signal.signal(signum, lambda *_: threading.Thread(target=server.shutdown).start())
        for note in notes:
            print(note, file=sys.stderr)
        print(listening(server.url), flush=True)
        server.serve_forever()
        print("fairq: stopping: finishing the requests in flight", file=sys.stderr, flush=True)
    print("fairq: stopped", file=sys.stderr)


def token_from(args: argparse.Namespace) -> str:
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
