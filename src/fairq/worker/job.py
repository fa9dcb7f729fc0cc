"""What a handler meets and what it decides: Job, Retry, Fail, Release, Handled, and a
safe description of a handler's exception. No queue calls here."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import _validate as v
from ..errors import LeaseLost
from ..limits import DEFAULT_MAX_BODY_BYTES, MAX_REASON_CHARS
from ..types import Lease, Outcome, Settled

class Decision(NamedTuple):
    """A handler's decision: (outcome, reason, delay) for its settle, and an
    ack's result (the JSON value the handler returned; None: none)."""

    outcome: Outcome
    reason: str | None
    delay: float | None
    result: Any = None


#: The decision for a job the worker gives back unused.
RELEASE = Decision(Outcome.RELEASE, None, None)


def result_limit(queue: Any) -> int:
    """The most canonical JSON a result may take on `queue` (a Queue's, or an async
    facade's Queue's, max_body_bytes); a Client's server: the default limit."""
    limit = getattr(getattr(queue, "sync", queue), "max_body_bytes", None)
    return limit if isinstance(limit, int) else DEFAULT_MAX_BODY_BYTES


class Retry(Exception):
    """Raised by a handler: settle the event as retry, after `delay` seconds
    (None: the queue's backoff). Past the retry budget it is quarantined."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        self.reason = v.reason(reason, "reason", required=True)
        self.delay = v.optional_seconds(delay, "delay")
        super().__init__(self.reason)


class Fail(Exception):
    """Raised by a handler: quarantine the event now, with `reason`; it blocks its flow until a redrive."""

    def __init__(self, reason: str) -> None:
        self.reason = v.reason(reason, "reason", required=True)
        super().__init__(self.reason)


class Release(Exception):
    """Raised by a handler: give the event back unused. It is ready again at
    once and this claim does not count against its retry budget; no reason is
    stored. For work this worker cannot do yet (a task another deploy knows)."""

    def __init__(self) -> None:
        super().__init__("release")


class Job:
    """One claimed event in a handler's hands.

    `lease` is the Lease (the heartbeat keeps its lease_until current);
    event_id, flow, seq, body and attempts are read from it. `lost` turns
    True when a heartbeat finds the lease gone (it expired and the event was
    claimed again, or it was settled elsewhere), or when the handler ran past
    the worker's timeout and the event was retried: the event belongs to
    someone else now, and this handler's result will not be settled. A long
    handler checks `lost` (or calls check()) between steps and gives up early.
    `stopping` turns True when the worker is asked to stop: finish soon.

    The worker's side (a handler needs none of it): the heartbeat replaces
    `lease` when it extends it, and calls lose() when it finds the lease
    gone; `loss` is the error a settle reports for a lost job. Where the job
    stands in its batch (waiting, running, decided) is the worker's record
    (fairq.worker.heartbeat), not the job's.
    """

    __slots__ = ("lease", "_stop", "_lost")

    def __init__(self, lease: Lease, stop: threading.Event) -> None:
        self.lease = lease
        self._stop = stop
        self._lost: LeaseLost | None = None

    @property
    def event_id(self) -> str:
        """The event's id."""
        return self.lease.event_id

    @property
    def flow(self) -> str | None:
        """The event's flow (None: a flow of its own)."""
        return self.lease.flow

    @property
    def seq(self) -> int:
        """The event's position in its flow."""
        return self.lease.seq

    @property
    def body(self) -> Any:
        """The event's JSON body."""
        return self.lease.body

    @property
    def kind(self) -> str | None:
        """The event's kind: the name of the task that runs it (None: enqueued without one)."""
        return self.lease.kind

    @property
    def attempts(self) -> int:
        """Claims of the event in this round, this one included."""
        return self.lease.attempts

    @property
    def timeout(self) -> float | None:
        """Seconds the event's own handler timeout allows (None: the worker's own)."""
        return self.lease.timeout

    @property
    def lost(self) -> bool:
        """True once the lease was found lost or the handler timed out; the result will not be settled."""
        return self._lost is not None

    @property
    def stopping(self) -> bool:
        """True once the worker was asked to stop."""
        return self._stop.is_set()

    @property
    def loss(self) -> LeaseLost | None:
        """The StaleLease or LeaseExpired that made the job lost; None while it is not."""
        return self._lost

    def check(self) -> None:
        """Raise the StaleLease or LeaseExpired a heartbeat met (or a timeout caused), if any."""
        if self._lost is not None:
            raise self._lost

    def lose(self, error: LeaseLost) -> None:
        """The lease is gone (`error` says how): `lost` turns True; nothing of the job will be settled."""
        self._lost = error


@dataclass(frozen=True)
class Handled:
    """What a worker did with one claimed event.

    outcome and reason: the handler's decision (retry "timeout" when it ran
    past the worker's timeout). settled: the state the settle left the event
    in; None when the lease was lost first (`lost` says how) and nothing was
    written.
    """

    event_id: str
    outcome: Outcome
    reason: str | None
    settled: Settled | None
    lost: LeaseLost | None = None


def describe(exc: BaseException) -> str:
    """A handler exception as a retry reason: its type and message, printable,
    bounded. Never raises, even for an exception whose __str__ does."""
    name = type(exc).__name__
    try:
        message = str(exc).strip()
    except Exception as broken:  # the exception cannot say what it is: say that instead
        message = f"<str() raised {type(broken).__name__}>"
    text = f"{name}: {message}" if message else name
    text = text.replace("\x00", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:MAX_REASON_CHARS]


def handler_timeout(job: Job, worker_timeout: float | None) -> float | None:
    """How long the job's handler may run: the event's own timeout, stored
    with it (Lease.timeout), else the worker's."""
    own = job.lease.timeout
    return worker_timeout if own is None else own
