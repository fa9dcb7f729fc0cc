"""The handler's side of the contract: refuse a handler that cannot work when
the worker is built, and turn what one handler call did into a Decision.

The try/except wraps only the handler call: nothing the queue raises passes
through here.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from .. import _validate as v
from ..errors import InvalidInput
from ..limits import DEFAULT_MAX_BODY_BYTES, MAX_REASON_CHARS
from ..types import Outcome
from .job import RELEASE, Decision, Fail, Job, Release, Retry, describe

log = logging.getLogger("fairq.worker")

#: The retry reason of a handler that returned an awaitable instead of finishing.
AWAITABLE = "handler returned an awaitable: run async handlers with fairq.aio.AsyncWorker"


def check_handler(handler: Any) -> Callable[[Job], Any]:
    """The handler, if a worker can call it with one Job; else InvalidInput on "handler".

    Refused: anything not callable, an async function (its coroutine would
    never run), and a callable whose signature cannot bind one positional
    argument. A callable whose signature cannot be read is accepted.
    """
    checked: Callable[[Job], Any] = check_callable(
        handler, False, " is an async function: fairq.Worker runs plain functions; run it with "
                        "fairq.aio.AsyncWorker (fairq work picks it for you)",
        "{name}{signature} cannot be called with one argument, the Job (def handle(job): ...)")
    return checked


def check_callable(handler: Any, want_async: bool, wrong_kind: str, one_arg: str) -> Any:
    """The handler, if callable, async exactly when `want_async` (else InvalidInput: its name +
    `wrong_kind`) and able to bind one positional argument (else InvalidInput: `one_arg`
    formatted with name and signature). A signature that cannot be read is accepted."""
    if not callable(handler):
        raise InvalidInput("handler", "must be callable")
    name = getattr(handler, "__qualname__", None) or type(handler).__name__
    if is_async(handler) != want_async:
        raise InvalidInput("handler", f"{name}{wrong_kind}")
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):  # a builtin or extension callable: it will tell when called
        return handler
    try:
        signature.bind(object())
    except TypeError:
        raise InvalidInput("handler", one_arg.format(name=name, signature=signature)) from None
    return handler


def is_async(handler: Any) -> bool:
    """True for an async function, a partial of one, or an object whose __call__ is one."""
    call = getattr(handler, "__call__", None)
    return inspect.iscoroutinefunction(handler) or (
        not inspect.isroutine(handler) and call is not None and inspect.iscoroutinefunction(call))


def decide(handler: Callable[[Job], Any], job: Job, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Decision:
    """Run the handler on one job: (outcome, reason, delay, result) for its settle.

    Return: ack, unless it returned an awaitable (closed unrun, a retry); a
    value other than None is the ack's result (returned(): a JSON value of at
    most max_bytes, else the event is quarantined with reason "bad_result:
    ..."). Retry, Fail and Release, raised or returned: their decision. Any
    other Exception: a retry named by describe(). BaseException propagates.
    """
    try:
        result = handler(job)
    except Retry as decision:
        return Decision(Outcome.RETRY, decision.reason, decision.delay)
    except Fail as decision:
        return Decision(Outcome.FAIL, decision.reason, None)
    except Release:
        return RELEASE
    except Exception as exc:
        reason = describe(exc)
        if not job.lost:  # giving up on a lost lease (job.check()) is no handler error
            log.warning("handler.error event_id=%s attempts=%d error=%r", job.event_id, job.attempts, reason,
                        exc_info=exc)
        return Decision(Outcome.RETRY, reason, None)
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # a coroutine never awaited: closed, so no "never awaited" warning
        log.warning("handler.error event_id=%s attempts=%d error=%r", job.event_id, job.attempts, AWAITABLE)
        return Decision(Outcome.RETRY, AWAITABLE, None)
    return returned(result, job, max_bytes)


def returned(result: Any, job: Job, max_bytes: int) -> Decision:
    """The decision a handler's return value makes: None (or fairq.ACK) a plain
    ack; a Retry, Fail or Release returned instead of raised, its decision; any other
    value the ack's result, if it is JSON within max_bytes (the queue's body
    limit) -- else the event is quarantined (a retry would return it again)."""
    if result is None or result is Outcome.ACK:
        return Decision(Outcome.ACK, None, None)
    if isinstance(result, Retry):
        return Decision(Outcome.RETRY, result.reason, result.delay)
    if isinstance(result, Fail):
        return Decision(Outcome.FAIL, result.reason, None)
    if isinstance(result, Release):
        return RELEASE
    try:
        v.body(result, "result", max_bytes=max_bytes)
    except InvalidInput as exc:
        text = f"bad_result: {exc.field}: {exc.problem}".replace("\x00", "\\0")
        reason = text.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_REASON_CHARS]
        log.error("handler.bad_result event_id=%s attempts=%d error=%r", job.event_id, job.attempts, reason)
        return Decision(Outcome.FAIL, reason, None)
    return Decision(Outcome.ACK, None, None, result)
