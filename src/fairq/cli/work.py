"""`fairq work MODULE:FUNCTION`: run a handler on claimed events until stopped.

Logs go to stderr through logging.getLogger("fairq"), one key=value record
per line; on a terminal a progress line shows claimed / acked / retried /
quarantined per second. Exit status: 0 after a clean stop (Ctrl-C or SIGTERM:
running handlers finish and are settled) or, with --until-idle, when nothing
is left to claim; 1 if handlers were still running when the stop timeout
ended (their leases expire); 128 + signal number after a second signal.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from ..errors import FairqError
from ..worker import COUNTS, Worker
from ._common import EXIT_OK, EXIT_REFUSED, open_existing

#: What the progress line shows, per second.
RATES = ("claimed", "acked", "retried", "quarantined")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("work", help="run MODULE:FUNCTION on claimed events until stopped (Ctrl-C)")
    p.add_argument("handler", metavar="MODULE:FUNCTION",
                   help="the handler; MODULE is imported from the current directory or sys.path")
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="handlers at once (default 1)")
    p.add_argument("--processes", action="store_true", help="run N processes instead of N threads")
    p.add_argument("--batch", type=int, default=1, metavar="N",
                   help="claim and settle up to N events per transaction (default 1)")
    p.add_argument("--owner", metavar="NAME", help="the owner label on leases (default host:pid)")
    p.add_argument("--lease-seconds", type=float, metavar="S",
                   help="each claim's lease; a heartbeat extends it every S/3 (default: the stored policy's)")
    p.add_argument("--max-attempts", type=int, metavar="N",
                   help="refuse to start unless the stored policy has N claims per round "
                        "(change it with fairq policy set)")
    p.add_argument("--stop-timeout", type=float, default=30.0, metavar="S",
                   help="after Ctrl-C or SIGTERM, seconds running handlers get to finish (default 30)")
    p.add_argument("--until-idle", action="store_true", help="stop when nothing is left to claim")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.set_defaults(func=work)


def work(args: argparse.Namespace) -> int:
    handler = load_handler(args.handler)
    configure_logging(args.log_level)
    with open_existing(args, max_attempts=args.max_attempts) as q:
        worker = Worker(q, handler, owner=args.owner, concurrency=args.concurrency, batch=args.batch,
                        processes=args.processes, lease_seconds=args.lease_seconds,
                        stop_timeout=args.stop_timeout,
                        process_init=functools.partial(configure_logging, args.log_level))
        progress = Progress(worker, sys.stderr) if sys.stderr.isatty() else None
        try:
            counts = worker.run(until_idle=args.until_idle)
        finally:
            if progress is not None:
                progress.close()
    print("fairq work: " + ", ".join(f"{name} {counts[name]}" for name in COUNTS), file=sys.stderr)
    if counts["abandoned"]:
        print(f"fairq work: {counts['abandoned']} handlers were still running after {args.stop_timeout} s; "
              "their leases will expire and other workers take the events over", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


def load_handler(spec: str) -> Callable[..., Any]:
    """The function named by MODULE:FUNCTION, importing MODULE from the current directory if need be."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise FairqError(f"handler {spec!r}: expected MODULE:FUNCTION, e.g. examples.handlers:handle")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise FairqError(f"handler {spec!r}: cannot import {module_name}: {exc}") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise FairqError(f"handler {spec!r}: {module_name} has no {attribute}") from None
    if not callable(found):
        raise FairqError(f"handler {spec!r} is not callable")
    return found


def configure_logging(level: str) -> None:
    """Send the "fairq" logger's records to stderr as `time level pid message` lines (once per process)."""
    logger = logging.getLogger("fairq")
    logger.setLevel(level)
    if any(getattr(h, "_fairq_cli", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    clear = "\r\x1b[K" if sys.stderr.isatty() else ""  # over the progress line, not after it
    handler.setFormatter(logging.Formatter(clear + "%(asctime)s %(levelname)s pid=%(process)d %(message)s"))
    handler._fairq_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)


class Progress:
    """A terminal line rewritten every second: claimed / acked / retried / quarantined per second."""

    def __init__(self, worker: Worker, stream: IO[str], every: float = 1.0) -> None:
        self._worker = worker
        self._stream = stream
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fairq-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        before, since = self._worker.counts(), time.monotonic()
        while not self._done.wait(self._every):
            counts, now = self._worker.counts(), time.monotonic()
            rates = "  ".join(f"{name} {(counts[name] - before[name]) / (now - since):.0f}/s" for name in RATES)
            self._stream.write(f"\r{rates}  (acked {counts['acked']} in all)\x1b[K")
            self._stream.flush()
            before, since = counts, now

    def close(self) -> None:
        """Stop updating and end the line."""
        self._done.set()
        self._thread.join()
        self._stream.write("\n")
        self._stream.flush()
