"""Run a Worker as child processes, each opening the queue file (or its server) again.

The parent spawns the children (nothing is inherited by fork), passes the
first stop signal (or Worker.stop()) on to them as SIGTERM and waits: each
child gives its running handler the stop timeout to finish and settles it.
A second signal SIGKILLs the children and exits at once. Children ignore
SIGINT: a terminal's Ctrl-C reaches the whole process group, and the parent
decides. Counts live in shared memory, so the parent's Worker.counts() adds
up all of its children. A child whose handler ran past the worker's timeout
settles it as a retry and exits; the parent starts another in its place. A
child that exits with an error, on its own or while stopping, stops the
rest, and run() raises. This module knows the Worker only through its
attributes (it does not import it): the child builds one of the class it is given.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import FairqError, InvalidInput
from .counts import Tally
from .signals import StopSignals

CTX = multiprocessing.get_context("spawn")
#: A child's exit status when handlers were still running at the end of the stop timeout.
EXIT_ABANDONED = 3
#: A child's exit status after its handler ran past the timeout (its batch settled): it is replaced.
EXIT_TIMEOUT = 4
#: Seconds the parent waits past the stop timeout before it SIGKILLs a child.
KILL_MARGIN = 5.0

log = logging.getLogger("fairq.worker")


def shared_counts(n: int) -> Any:
    """n counters in shared memory, with a lock, for a worker and its children."""
    return CTX.Array("q", n)


def run_processes(worker: Any, mode: str | None, *, signals: bool) -> dict[str, int]:
    """Worker.run() with `worker.concurrency` child processes."""
    args = (type(worker), reopener(worker.queue), worker.handler, worker.child_options(), worker.process_init,
            worker.core.tally.values, mode, worker.concurrency)
    main = threading.current_thread() is threading.main_thread()

    def start(i: int) -> Any:
        child = CTX.Process(target=_child, args=args, name=f"fairq-worker-{i}")
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # inherited by the child
        try:
            child.start()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return child

    children: list[Any] = []

    def kill_all() -> None:
        _send(children, signal.SIGKILL)

    failure: FairqError | None = None
    deadline: float | None = None  # set when the children were told to stop
    killed: list[Any] = []  # children SIGKILLed at the deadline: counted as abandoned, not as failed
    with StopSignals((signal.SIGTERM, signal.SIGINT) if signals else (), on_second=kill_all,
                     stop_timeout=worker.stop_timeout) as received:
        children.extend(start(i) for i in range(worker.concurrency))
        # A child that ends after a timeout between its replacement check and
        # this one still counts as live (it is replaced on the next round):
        # else the run could end with work left for its replacement.
        while live := [c for c in _replace_timed_out(children, start, replace=deadline is None)
                       if c.exitcode is None or (deadline is None and c.exitcode == EXIT_TIMEOUT)]:
            failure = failure or _failure(children, stopping=deadline is not None)
            asked = received.signum is not None or worker.stop_requested
            if deadline is None and (asked or failure is not None):
                _send(children, signal.SIGTERM)
                deadline = time.monotonic() + worker.stop_timeout + KILL_MARGIN
            if deadline is not None and time.monotonic() > deadline:
                kill_all()
                killed = live
                worker.core.tally.add("abandoned", len(live))
                break
            multiprocessing.connection.wait([c.sentinel for c in live], timeout=0.05)
    for child in children:
        child.join()
    failure = failure or _failure([c for c in children if c not in killed], stopping=deadline is not None)
    if failure is not None:
        raise failure
    return worker.counts()  # type: ignore[no-any-return]


def _replace_timed_out(children: list[Any], start: Callable[[int], Any], *, replace: bool) -> list[Any]:
    """The children, after (unless the worker is stopping) each one that exited after a
    timeout was replaced in place by a new one."""
    for i, child in enumerate(children):
        if replace and child.exitcode == EXIT_TIMEOUT:
            log.warning("worker.replaced pid=%s reason=timeout", child.pid)
            child.join()
            children[i] = start(i)
    return children


def _send(children: list[Any], signum: int) -> None:
    """Send signum to the children still running (one may end meanwhile)."""
    for child in children:
        if child.pid is not None and child.exitcode is None:
            try:
                os.kill(child.pid, signum)
            except ProcessLookupError:
                pass


def _failure(children: list[Any], *, stopping: bool) -> FairqError | None:
    """The error to raise for the first of these children whose exit status
    says it failed; None if none did. A child stopped by the parent's SIGTERM
    before it installed its own handler (it had claimed nothing) did not fail."""
    ok = (0, EXIT_ABANDONED, EXIT_TIMEOUT) + ((-signal.SIGTERM,) if stopping else ())
    for child in children:
        if child.exitcode is not None and child.exitcode not in ok:
            return FairqError(f"worker process {child.pid} exited with status {child.exitcode}; "
                              "its error, if any, is above")
    return None


def check_sendable(handler: Any, process_init: Any, queue: Any) -> None:
    """Refuse, as InvalidInput, what cannot be sent to a spawned worker process."""
    for name, value in (("handler", handler), ("process_init", process_init)):
        _check_picklable(name, value, "must be importable by name to run in processes (a module-level function)")
    try:
        reopen = reopener(queue)
    except AttributeError as exc:
        raise InvalidInput("queue", f"cannot be opened again in worker processes: {exc}") from None
    _check_picklable("queue", reopen, "its settings() must pickle to open it again in each "
                                      "worker process (e.g. clock= a module-level function)")


def _check_picklable(name: str, value: Any, problem: str) -> None:
    try:
        pickle.dumps(value)
    except Exception as exc:
        raise InvalidInput(name, f"{problem}: {exc}") from None


def reopener(queue: Any) -> Callable[[], Any]:
    """What a child process calls to open the worker's queue again: the same server (a Client's
    url), or the same file (a Queue's path), with the same settings()."""
    where = getattr(queue, "url", None) or os.fspath(queue.path)
    opener: Callable[..., Any] = type(queue)
    return functools.partial(opener, where, **queue.settings())


def _child(worker_class: Any, reopen: Callable[[], Any], handler: Callable[..., Any], options: dict[str, Any],
           process_init: Callable[[], Any] | None, shared: Any, mode: str | None, peers: int) -> None:
    """One worker process: a one-thread Worker on its own connection; SIGTERM stops it gracefully."""
    if process_init is not None:
        process_init()
    with reopen() as queue:
        worker = worker_class(queue, handler, **options)
        worker.core.tally = Tally(parent=Tally(shared))
        worker.core.peers = peers
        worker.core.idle_needs_no_inflight = True
        worker.on_timeout(_exit_replaced)
        with StopSignals((signal.SIGTERM,)) as received:
            worker.run_threads(mode, received)
        abandoned = worker.running_handlers()
    sys.exit(EXIT_ABANDONED if abandoned else 0)


def _exit_replaced() -> None:
    """End a worker process whose handler ran past its timeout (its batch is settled): the parent
    starts another. The handler's thread cannot be stopped any other way."""
    logging.shutdown()
    os._exit(EXIT_TIMEOUT)
