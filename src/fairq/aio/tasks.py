"""A fairq.Tasks on AsyncWorker: each job's task by its kind, an async task
awaited on the loop, a plain one on a thread of the worker's own (never the
loop's default executor), so it does not block the loop.

The unknown-kind decision and a decision a task returns are raised, for the
worker's decide() to read, as for fairq.Worker. A plain task whose awaiting
is cancelled (a timeout, a lost lease) runs on in its thread, unused, as a
fairq.Worker's thread does; it sees job.lost turn True.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from typing import Any

from ..tasks import Task, Tasks, check_unknown
from ..worker import Job


class TaskRunner:
    """The handler AsyncWorker runs for a Tasks: ``await runner(job)``.

    unknown: "quarantine" or "release" (fairq.Tasks.dispatch). threads: how many
    plain tasks may run at once (the worker's concurrency). close() lets the
    threads end; the next plain task starts them again.
    """

    def __init__(self, tasks: Tasks, unknown: str, threads: int) -> None:
        self.tasks = tasks
        self.unknown = check_unknown(unknown)
        self.threads = threads
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    async def __call__(self, job: Job) -> Any:
        found = self.tasks.route(job, self.unknown)
        if not isinstance(found, Task):
            raise found
        if found.is_async:
            return await found(job)
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="fairq-task")
        call = functools.partial(contextvars.copy_context().run, found, job)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Let the task threads end once their tasks are done (does not wait)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
