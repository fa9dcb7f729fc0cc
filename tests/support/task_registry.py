"""Task registries for the task tests, imported by name (`fairq work task_registry:tasks`,
worker processes, pickling). `tasks` holds plain tasks; `mixed` an async one too; `empty` none.
FAIRQ_TEST_MARKS (a folder), when set, gets a file per run of `note`: KIND.EVENT_ID.PID."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import fairq

tasks = fairq.Tasks()
mixed = fairq.Tasks()
empty = fairq.Tasks()


@tasks.task("add", max_attempts=2)
def add(job: fairq.Job) -> int:
    """Returns the sum of body["a"] and body["b"]."""
    _mark("add", job)
    return int(job.body["a"]) + int(job.body["b"])


@tasks.task()
def note(job: fairq.Job) -> None:
    """Leaves a mark, nothing else (its name is its __qualname__, "note")."""
    _mark("note", job)


@tasks.task("refuse")
def refuse(job: fairq.Job) -> fairq.Fail:
    """Returns (does not raise) a Fail: the event is quarantined all the same."""
    return fairq.Fail("refused by the task")


@mixed.task("plain")
def plain(job: fairq.Job) -> str:
    _mark("plain", job)
    return "plain"


@mixed.task("later")
async def later(job: fairq.Job) -> str:
    await asyncio.sleep(0)
    _mark("later", job)
    return "later"


def _mark(kind: str, job: fairq.Job) -> None:
    folder = os.environ.get("FAIRQ_TEST_MARKS")
    if folder:
        Path(folder, f"{kind}.{job.event_id}.{os.getpid()}").touch()
