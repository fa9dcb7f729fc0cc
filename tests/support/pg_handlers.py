"""Handlers for the PostgreSQL worker tests, run by `fairq work` in other processes.

Settings come from the environment: FAIRQ_TEST_MARKS (a folder: `mark_time`
writes the time a handler started, one file per event), FAIRQ_TEST_HISTORY
(a folder: `history` appends one line per handler start to a file per process:
monotonic nanoseconds, which the processes of one machine share, then flow,
seq, event_id and attempts), FAIRQ_TEST_INBOX (with `history_relay`: the
receiver database, an Inbox that applies each delivery's effect once;
`history_relay_async` is the same as an async handler).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/support, for work_handlers

import fairq  # noqa: E402


def mark_time(job: fairq.Job) -> None:
    """Note when the handler started (time.time()) in FAIRQ_TEST_MARKS/<event_id>."""
    Path(os.environ["FAIRQ_TEST_MARKS"], job.event_id).write_text(repr(time.time()))


def history(job: fairq.Job) -> None:
    """Append this start to the process's history file, then work body["work"] ms."""
    line = f"{time.monotonic_ns()} {job.flow} {job.seq} {job.event_id} {job.attempts}\n"
    with open(Path(os.environ["FAIRQ_TEST_HISTORY"], f"{os.getpid()}.log"), "a") as out:
        out.write(line)
    time.sleep(job.body.get("work", 0) / 1000)


def history_relay(job: fairq.Job) -> None:
    """history(), then deliver the event to the receiver's Inbox (its effect happens once)."""
    import work_handlers

    history(job)
    work_handlers.relay(job)


async def history_relay_async(job: fairq.Job) -> None:
    """history_relay as an async handler (`fairq work` runs it on fairq.aio.AsyncWorker)."""
    history_relay(job)


if __name__ == "__main__":  # python pg_handlers.py URL IDLE_MAX: a Worker running mark_time until SIGTERM
    with fairq.Queue(sys.argv[1]) as queue:
        fairq.Worker(queue, mark_time, idle_max=float(sys.argv[2])).run()
