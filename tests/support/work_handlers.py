"""Handlers for worker tests that run in other processes (`fairq work`, processes=True).

Settings come from the environment, which child processes inherit:
FAIRQ_TEST_MARKS (a folder where handlers note that they started),
FAIRQ_TEST_INBOX (the receiver database of `relay`), FAIRQ_TEST_LOG (a
folder where `relay` appends what the receiver answered).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for helpers

import fairq  # noqa: E402
from helpers import OUTCOME, Receiver  # noqa: E402

_receiver: Receiver | None = None


def slow(job: fairq.Job) -> None:
    """Leave a mark named event_id.pid, then sleep body["sleep"] seconds or,
    with body["until_stopping"], until the worker is asked to stop."""
    Path(os.environ["FAIRQ_TEST_MARKS"], f"{job.event_id}.{os.getpid()}").touch()
    if job.body.get("until_stopping"):
        _wait_until_stopping(job)
    else:
        time.sleep(job.body.get("sleep", 1.0))


def fails_or_sleeps(job: fairq.Job) -> None:
    """Raise ValueError when body["fail"], else as `slow`."""
    if job.body.get("fail"):
        raise ValueError("card declined")
    slow(job)


def exits_when_stopping(job: fairq.Job) -> None:
    """Leave a mark, wait until the worker stops, then end the process with status 5:
    a worker process that fails while stopping."""
    Path(os.environ["FAIRQ_TEST_MARKS"], f"{job.event_id}.{os.getpid()}").touch()
    _wait_until_stopping(job)
    os._exit(5)


def _wait_until_stopping(job: fairq.Job) -> None:
    deadline = time.monotonic() + 60  # only to stop a hang
    while not job.stopping and time.monotonic() < deadline:
        time.sleep(0.01)


def relay_in_company(job: fairq.Job) -> None:
    """relay(), but a process's first event waits until a second process has
    one too (marks in FAIRQ_TEST_MARKS), so the work is surely shared."""
    marks = Path(os.environ["FAIRQ_TEST_MARKS"])
    mine = marks / str(os.getpid())
    if not mine.exists():
        mine.touch()
        deadline = time.monotonic() + 60  # only to stop a hang
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    relay(job)


def relay(job: fairq.Job) -> None:
    """Deliver the event to the receiver's Inbox, which adds its delta to its flow's total once."""
    global _receiver
    if _receiver is None:
        _receiver = Receiver(Path(os.environ["FAIRQ_TEST_INBOX"]))
    time.sleep(job.body.get("work", 0) / 1000)
    answer = _receiver.send(job.lease)
    with open(Path(os.environ["FAIRQ_TEST_LOG"], f"{os.getpid()}.log"), "a") as log:
        log.write(f"{answer} {job.event_id}\n")
    outcome = OUTCOME[answer]
    if outcome == "retry":
        raise fairq.Retry(answer)
    if outcome == "fail":
        raise fairq.Fail(answer)


async def async_handle(job: fairq.Job) -> None:
    """An async handler: `fairq work` runs it with fairq.aio.AsyncWorker; a body {"fail": true} fails."""
    await asyncio.sleep(0)
    if isinstance(job.body, dict) and job.body.get("fail"):
        raise fairq.Fail("refused by the async handler")
    import logging

    logging.getLogger("work_handlers").info("handled %s asynchronously in %d", job.event_id, os.getpid())


def takes_nothing() -> None:
    """A handler that cannot take a Job."""


def steady(job: fairq.Job) -> None:
    """Sleep body["sleep"] seconds (default 0), then ack; a process's handler logs each event it handles."""
    import logging

    logging.getLogger("work_handlers").info("handling %s in %d", job.event_id, os.getpid())
    time.sleep(job.body.get("sleep", 0))


def retry_once(job: fairq.Job) -> None:
    """The first attempt retries after body["delay"] seconds; the second acks; body["fail"] quarantines."""
    if job.body.get("fail"):
        raise fairq.Fail("refused by the test")
    if job.attempts == 1:
        raise fairq.Retry("first try", delay=job.body.get("delay", 0.3))
