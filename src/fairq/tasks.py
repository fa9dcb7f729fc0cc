"""Tasks: handlers registered by name, the per-task policy their events are
enqueued with, and dispatch of a job to the task its kind names.

A task is a handler (a function of one Job) registered in a Tasks under a
name; an event enqueued for it carries that name as its kind, with the
task's max_attempts, timeout and backoff. `Tasks.dispatch` runs the task a
job's kind names; a job of a kind the registry does not know (or of no kind)
gets a decision instead: Fail("unknown_kind: NAME") (quarantine, never
retried) or, with unknown="release", Release (given back unused).
fairq.Worker and fairq.aio.AsyncWorker take a Tasks where they take a
handler. No queue calls here but Task.enqueue's one.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pickle
from collections.abc import Callable, Iterator
from typing import Any, overload

from . import _validate as v
from .errors import InvalidInput, UsageError
from .kernel.policy import Backoff
from .limits import MAX_ATTEMPTS, MAX_KIND_CHARS, MAX_REASON_CHARS
from .worker.handler import check_callable, is_async
from .worker.job import Fail, Job, Release

__all__ = ["Tasks", "Task", "AsyncTask", "UNKNOWN", "NO_KIND", "check_unknown", "unknown_reason",
           "check_tasks", "any_async", "lookup"]

log = logging.getLogger("fairq.worker")

#: What a worker may do with a job of a kind its registry does not know.
UNKNOWN = ("quarantine", "release")
#: How an unknown-kind reason names a job enqueued without a kind.
NO_KIND = "(none)"


class Task:
    """A function registered in a Tasks under `name`: still callable like the function.

    `name` is the kind its events carry; `max_attempts`, `timeout` (seconds a
    handler may run) and `backoff` are written on each event it enqueues (None:
    the queue's stored policy, or the worker's timeout). `is_async` is True for
    an ``async def`` task (it runs on fairq.aio.AsyncWorker). `fn` is the function.
    """

    def __init__(self, fn: Callable[..., Any], name: str, max_attempts: int | None, timeout: float | None,
                 backoff: Backoff | None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.backoff = backoff
        self.is_async = is_async(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def enqueue(self, q: Any, body: Any, *, event_id: str | None = None, flow: str | None = None,
                tenant: str | None = None, delay: float = 0.0, conn: Any = None) -> Any:
        """Enqueue an event for this task on `q` (a Queue, a Client, or an AsyncQueue, whose
        awaitable is returned): its kind is this task's name, with the task's max_attempts,
        timeout and backoff. event_id=None: a new unique id (see Queue.enqueue)."""
        return q.enqueue(event_id, body, flow=flow, tenant=tenant, delay=delay, conn=conn, kind=self.name,
                         max_attempts=self.max_attempts, timeout=self.timeout, backoff=self.backoff)

    def __repr__(self) -> str:
        return f"<fairq.Task {self.name!r}>"

    def __reduce__(self) -> tuple[Callable[[str, str], Any], tuple[str, str]]:
        """Pickled by reference (worker processes): the module attribute the decorator replaced."""
        module, qualname = getattr(self.fn, "__module__", None), getattr(self.fn, "__qualname__", None)
        if not module or not qualname or "<locals>" in qualname:
            raise pickle.PicklingError(f"task {self.name!r} is not defined at the top level of a module")
        try:
            found = lookup(module, qualname)
        except (ImportError, AttributeError):
            found = None
        if found is not self:
            raise pickle.PicklingError(f"task {self.name!r}: {module}.{qualname} is not this task "
                                       "(decorate the module-level function with @tasks.task)")
        return lookup, (module, qualname)


class AsyncTask(Task):
    """A Task of an ``async def`` function: calling it returns the coroutine, as the function does."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return await self.fn(*args, **kwargs)


def lookup(module: str, qualname: str) -> Any:
    """The object named `qualname` in `module` (how a pickled Task is found again)."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


class Tasks:
    """A registry of tasks by name: ``tasks = fairq.Tasks()``, then ``@tasks.task()`` on each function.

    ``name in tasks``, ``len(tasks)``, and iteration (the Task objects, in the
    order they were registered) read it; get(name) finds one. fairq.Worker,
    fairq.aio.AsyncWorker and ``fairq work MODULE:TASKS`` take a Tasks where
    they take a handler and run each job's task by its kind.
    """

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    @overload
    def task(self, name: Callable[..., Any], /) -> Task: ...

    @overload
    def task(self, name: str | None = None, *, max_attempts: int | None = None, timeout: float | None = None,
             backoff: Backoff | None = None) -> Callable[[Callable[..., Any]], Task]: ...

    def task(self, name: Any = None, *, max_attempts: int | None = None, timeout: float | None = None,
             backoff: Backoff | None = None) -> Any:
        """Register the decorated function as a task; returns its Task (still callable like it).

        name: the kind of its events (default the function's __qualname__), printable,
        at most 200 characters; a name registered already raises UsageError.
        max_attempts (1 to 1,000,000 claims per round), timeout (seconds, > 0) and backoff
        (a fairq.Backoff): the policy stored on each event it enqueues; None: the queue's
        (the worker's timeout). Bad options raise InvalidInput naming the option, before
        anything is registered. ``@tasks.task`` without parentheses takes the defaults.
        """
        if callable(name) and not isinstance(name, str):  # @tasks.task, no parentheses
            return self._add(name, None, *_check_options(max_attempts, timeout, backoff))
        checked = _check_name(name) if name is not None else None
        options = _check_options(max_attempts, timeout, backoff)
        return lambda fn: self._add(fn, checked, *options)

    def _add(self, fn: Any, name: str | None, max_attempts: int | None, timeout: float | None,
             backoff: Backoff | None) -> Task:
        """Register `fn` under `name` (default its __qualname__): its Task, or a refusal."""
        if isinstance(fn, Task):
            raise UsageError(f"{fn.name!r} is a task already: register the function once")
        try:
            check_callable(fn, is_async(fn), "", "{name}{signature} cannot be called with one argument, the Job")
        except InvalidInput as exc:
            raise InvalidInput("fn", exc.problem) from None
        if name is None:
            qualname = getattr(fn, "__qualname__", None)
            if not isinstance(qualname, str):
                raise InvalidInput("name", f"is required for a {type(fn).__name__}, which has no __qualname__")
            name = _check_name(qualname)
        if name in self._tasks:
            raise UsageError(f"a task named {name!r} is registered already ({self._tasks[name].fn!r}); "
                             "give one of them another name")
        task = (AsyncTask if is_async(fn) else Task)(fn, name, max_attempts, timeout, backoff)
        self._tasks[name] = task
        return task

    def get(self, name: str) -> Task | None:
        """The task registered under `name`; None if there is none."""
        return self._tasks.get(name) if isinstance(name, str) else None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self._tasks.values()))

    def __repr__(self) -> str:
        return f"<fairq.Tasks {sorted(self._tasks)!r}>"

    def route(self, job: Job, unknown: str = "quarantine") -> Task | Fail | Release:
        """The task the job's kind names, or the decision for a kind this registry does not
        know (or none): Fail("unknown_kind: NAME"), or with unknown="release" Release()."""
        unknown = check_unknown(unknown)
        kind = job.kind
        task = self.get(kind) if kind is not None else None
        if task is not None:
            return task
        if unknown == "release":
            log.info("task.unknown_kind event_id=%s kind=%s decision=release", job.event_id, kind)
            return Release()
        reason = unknown_reason(kind)
        log.warning("task.unknown_kind event_id=%s kind=%s decision=fail", job.event_id, kind)
        return Fail(reason)

    def dispatch(self, job: Job, unknown: str = "quarantine") -> Any:
        """Run the task the job's kind names on the job: what it returns (an async task's
        coroutine, unawaited). For a kind this registry does not know, or a job of no kind,
        the decision instead, returned (not raised): Fail with reason "unknown_kind: NAME"
        ("unknown_kind: (none)" for no kind) -- the event is quarantined, never retried --
        or, with unknown="release", Release (given back unused, ready at once)."""
        found = self.route(job, unknown)
        return found(job) if isinstance(found, Task) else found


def check_unknown(unknown: Any) -> str:
    """`unknown`, if it is "quarantine" or "release"; else InvalidInput naming "unknown"."""
    if not isinstance(unknown, str) or unknown not in UNKNOWN:
        raise InvalidInput("unknown", f"must be 'quarantine' or 'release', got {unknown!r}")
    return unknown


def unknown_reason(kind: str | None) -> str:
    """The quarantine reason of a job of a kind no task has: "unknown_kind: NAME"
    ("unknown_kind: (none)" for a job enqueued without a kind)."""
    name = NO_KIND if kind is None else str(kind).replace("\x00", "\\0")
    text = f"unknown_kind: {name}".encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:MAX_REASON_CHARS]


def check_tasks(tasks: Tasks, *, sync: bool) -> Tasks:
    """The Tasks, if a worker can run it: UsageError when it holds no task (every job would
    be of an unknown kind) or, for fairq.Worker (sync=True), naming the async tasks it holds."""
    if not len(tasks):
        raise UsageError("the fairq.Tasks holds no task: register tasks (import their modules) before "
                         "the worker is built, or every job would be of an unknown kind")
    names = [task.name for task in tasks if task.is_async]
    if sync and names:
        raise UsageError(f"fairq.Worker runs plain functions; these tasks are async: {', '.join(names)}; "
                         "run them with fairq.aio.AsyncWorker (it runs plain tasks too, on threads)")
    return tasks


def any_async(tasks: Tasks) -> bool:
    """True when the Tasks holds an async task (it then runs on fairq.aio.AsyncWorker)."""
    return any(task.is_async for task in tasks)


def _check_name(name: Any) -> str:
    """A task name: a non-empty printable str of at most 200 characters; else InvalidInput on "name"."""
    if not isinstance(name, str):
        raise InvalidInput("name", f"must be a str, not {type(name).__name__}")
    if not name.strip():
        raise InvalidInput("name", "must not be empty or blank")
    if len(name) > MAX_KIND_CHARS:
        raise InvalidInput("name", f"must be at most {MAX_KIND_CHARS} characters, got {len(name)}")
    if not name.isprintable():
        raise InvalidInput("name", "must be printable text (no control characters or line breaks)")
    return name


def _check_options(max_attempts: Any, timeout: Any, backoff: Any) -> tuple[int | None, float | None,
                                                                          Backoff | None]:
    """A task's policy options, checked in order (InvalidInput names the first bad one)."""
    attempts = None if max_attempts is None else v.count(max_attempts, "max_attempts", low=1, high=MAX_ATTEMPTS)
    seconds = v.optional_seconds(timeout, "timeout", positive=True)
    if backoff is not None and not isinstance(backoff, Backoff):
        raise InvalidInput("backoff", f"must be a fairq.Backoff, not {type(backoff).__name__}")
    return attempts, seconds, backoff
