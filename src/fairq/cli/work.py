"""`fairq work MODULE:FUNCTION`: run a handler (or a fairq.Tasks) on claimed events until stopped.

Every logger's records (fairq's and the handler's own) go to stderr, one
per line, as key=value text or JSON (cli._logs); on a terminal a progress
line shows claimed / acked / retried / quarantined per second. Exit status:
0 after a clean stop (Ctrl-C or SIGTERM: running handlers finish and are
settled) or once the stop mode (--until-idle, --until-empty) is reached; 1
if handlers were still running when the stop timeout ended (their leases
expire) or the handler was refused; 2 for options an async handler cannot
take (--processes); 128 + signal number after a second signal. An
`async def` handler runs on fairq.aio.AsyncWorker: --concurrency N tasks on
one event loop. MODULE:TASKS naming a fairq.Tasks runs each job's task by its
kind (on AsyncWorker when any task is async; --unknown says what becomes of a
job of a kind it has no task for).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from ..errors import FairqError, InvalidInput
from .. import aio
from ..tasks import UNKNOWN, Tasks, any_async, check_tasks
from ..worker import COUNTS, Worker, check_handler
from ..worker.handler import is_async
from ..stores import names_server
from ._common import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, open_target, shown
from ._logs import JsonFormatter, KeyValueFormatter, StderrHandler

log = logging.getLogger("fairq.cli")

#: What the progress line shows, per second.
RATES = ("claimed", "acked", "retried", "quarantined")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("work", help="run MODULE:FUNCTION on claimed events until stopped (Ctrl-C)")
    p.add_argument("handler", metavar="MODULE:FUNCTION",
                   help="the handler, a function of one fairq.Job (an async def handler runs as tasks on one "
                        "event loop), or a fairq.Tasks (each job runs the task its kind names); MODULE is "
                        "imported from the current directory or sys.path")
    p.add_argument("--concurrency", type=int, default=1, metavar="N", help="handlers at once (default 1)")
    p.add_argument("--processes", action="store_true",
                   help="run N processes instead of N threads (not for an async def handler)")
    p.add_argument("--batch", type=int, default=1, metavar="N",
                   help="claim and settle up to N events per transaction; with --concurrency above 1, "
                        "no more than a fair share of the claimable flows (default 1)")
    p.add_argument("--owner", metavar="NAME", help="the owner label on leases (default host:pid)")
    p.add_argument("--lease-seconds", type=float, metavar="S",
                   help="each claim's lease; a heartbeat extends it every S/3 (default: the stored policy's)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="a handler still running after S seconds is given up: its event is retried with "
                        "reason 'timeout' (with --processes its process is killed and replaced; a thread "
                        "runs on, unused) (default: no timeout)")
    p.add_argument("--max-attempts", type=int, metavar="N",
                   help="refuse to start unless the stored policy has N claims per round "
                        "(change it with fairq policy set)")
    p.add_argument("--stop-timeout", type=float, default=30.0, metavar="S",
                   help="after Ctrl-C or SIGTERM, seconds running handlers get to finish (default 30)")
    p.add_argument("--no-tick", dest="tick", action="store_false",
                   help="do not turn due schedule slots into events (by default the worker ticks "
                        "schedules about once a second; ticking from many processes is safe)")
    p.add_argument("--no-listen", dest="listen", action="store_false",
                   help="poll instead of waiting for the database's notice of new work (PostgreSQL: "
                        "LISTEN/NOTIFY); needed behind a pooler in transaction mode such as PgBouncer")
    p.add_argument("--unknown", default="quarantine", choices=UNKNOWN,
                   help="with a fairq.Tasks, a job of a kind it has no task for is quarantined with reason "
                        "'unknown_kind: NAME' (quarantine, the default) or given back unused for another "
                        "worker (release: during a deploy, while workers that know it start)")
    until = p.add_mutually_exclusive_group()
    until.add_argument("--until-idle", action="store_true",
                       help="stop as soon as nothing is claimable now and no handler runs; events backing "
                            "off after a retry or delayed into the future are left ready for later")
    until.add_argument("--until-empty", action="store_true",
                       help="stop once nothing is ready, waiting (delayed or in retry backoff) or inflight: "
                            "waits through backoffs and delays; quarantined events, which need a redrive, "
                            "do not count")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="the lowest level logged, for fairq's records and the handler's own (default INFO)")
    p.add_argument("--log-format", default="text", choices=("text", "json"),
                   help="text: key=value records; json: one JSON object per line (default text)")
    p.set_defaults(func=work)


def work(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)  # first: --log-level DEBUG shows an import's traceback
    handler = load_handler(args.handler)
    run_async = any_async(handler) if isinstance(handler, Tasks) else is_async(handler)
    if run_async and args.processes:
        what = "holds async tasks" if isinstance(handler, Tasks) else "is an async function"
        print(f"fairq work: usage error: {args.handler} {what}: it runs as --concurrency N tasks "
              "on one event loop; --processes is for plain handlers", file=sys.stderr)
        return EXIT_USAGE
    if run_async:
        counts = asyncio.run(work_async(args, handler))
        return report(args, counts)
    with open_target(args, max_attempts=args.max_attempts) as q:
        worker = Worker(q, handler, owner=args.owner, concurrency=args.concurrency, batch=args.batch,
                        processes=args.processes, lease_seconds=args.lease_seconds,
                        stop_timeout=args.stop_timeout, timeout=args.timeout,
                        tick=args.tick, listen=args.listen, unknown=args.unknown,
                        process_init=functools.partial(configure_logging, args.log_level, args.log_format))
        log.info("work.start %s handler=%s", source(q), args.handler)
        with progress_line(worker):
            counts = worker.run(until_idle=args.until_idle, until_empty=args.until_empty)
    return report(args, counts)


async def work_async(args: argparse.Namespace, handler: Callable[..., Any] | Tasks) -> dict[str, int]:
    """`fairq work` for an async def handler: fairq.aio.AsyncWorker on the queue's own thread."""
    async with aio.wrap(open_target(args, max_attempts=args.max_attempts)) as q:
        worker = aio.AsyncWorker(q, handler, owner=args.owner, concurrency=args.concurrency, batch=args.batch,
                                 lease_seconds=args.lease_seconds, stop_timeout=args.stop_timeout,
                                 timeout=args.timeout, tick=args.tick, listen=args.listen,
                                 unknown=args.unknown)
        log.info("work.start %s handler=%s async=True", source(q.sync), args.handler)
        with progress_line(worker):
            return await worker.run(until_idle=args.until_idle, until_empty=args.until_empty)


def report(args: argparse.Namespace, counts: dict[str, int]) -> int:
    """Print the run's counts; the exit status (1 if handlers were abandoned at the stop timeout)."""
    if args.log_format == "json":  # every line a JSON object
        log.info("work.done %s", " ".join(f"{name}={counts[name]}" for name in COUNTS))
    else:
        print("fairq work: " + ", ".join(f"{name} {counts[name]}" for name in COUNTS), file=sys.stderr)
    if counts["abandoned"]:
        if args.log_format == "json":
            log.warning("work.abandoned handlers=%d stop_timeout=%s", counts["abandoned"], args.stop_timeout)
        else:
            print(f"fairq work: {counts['abandoned']} handlers were still running after {args.stop_timeout} s; "
                  "their leases will expire and other workers take the events over", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


def source(queue: Any) -> str:
    """Which database a worker drains, for its first log record: url=... or db=... (never a token)."""
    url = getattr(queue, "url", None)
    if url:
        return f"url={url}"
    path = os.fspath(queue.path)
    return f"db={shown(path) if names_server(path) else os.path.abspath(path)}"


def load_handler(spec: str) -> Callable[..., Any] | Tasks:
    """The function (or fairq.Tasks) named by MODULE:FUNCTION, importing MODULE from the current
    directory if need be; refused (FairqError) if it cannot be a handler (see fairq.worker.check_handler)."""
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise FairqError(f"handler {spec!r}: expected MODULE:FUNCTION, e.g. examples.handlers:handle")
    if module_name.endswith(".py") or os.sep in module_name:
        module_name = module_of_file(spec, module_name)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # SyntaxError, or whatever the module raises at import
        log.debug("work.import_failed handler=%s", spec, exc_info=True)
        raise FairqError(f"handler {spec!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise FairqError(f"handler {spec!r}: {module_name} has no {attribute}") from None
    if isinstance(found, Tasks):
        try:
            return check_tasks(found, sync=False)
        except FairqError as exc:
            raise FairqError(f"handler {spec!r}: {exc}") from None
    try:
        return aio.check_async_handler(found) if is_async(found) else check_handler(found)
    except InvalidInput as exc:
        raise FairqError(f"handler {spec!r}: {exc.problem}") from None


def module_of_file(spec: str, path: str) -> str:
    """The module name of the Python file `path` under the current directory
    (jobs/handlers.py: jobs.handlers), so worker processes import it alike."""
    if not os.path.isfile(path):
        raise FairqError(f"handler {spec!r}: there is no file {path}; give MODULE:FUNCTION, "
                         "e.g. examples.handlers:handle")
    relative = os.path.relpath(os.path.abspath(path), os.getcwd())
    parts = relative[: -len(".py")].split(os.sep) if relative.endswith(".py") else []
    if not parts or parts[0] == ".." or not all(part.isidentifier() for part in parts):
        raise FairqError(f"handler {spec!r}: {path} is not a module under the current directory; "
                         "run fairq work from the folder above it and give a module name (MODULE:FUNCTION, "
                         "e.g. handlers:handle for ./handlers.py)")
    return ".".join(parts)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Send every logger's records (fairq's and the handler's own) to stderr, one record per line:
    key=value text or JSON. A later call (another command in the same process)
    replaces the handler an earlier one added, so records go to today's stderr."""
    root = logging.getLogger()
    root.setLevel(level)
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)
    handler = StderrHandler(sys.stderr)
    clear = "\r\x1b[K" if sys.stderr.isatty() and fmt == "text" else ""  # over the progress line, not after it
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter(clear))
    root.addHandler(handler)


@contextlib.contextmanager
def progress_line(worker: Worker | aio.AsyncWorker) -> Iterator[None]:
    """A Progress line on stderr while the block runs, when stderr is a terminal."""
    progress = Progress(worker, sys.stderr) if sys.stderr.isatty() else None
    try:
        yield
    finally:
        if progress is not None:
            progress.close()


class Progress:
    """A terminal line rewritten every second: claimed / acked / retried / quarantined per second."""

    def __init__(self, worker: Worker | aio.AsyncWorker, stream: IO[str], every: float = 1.0) -> None:
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
