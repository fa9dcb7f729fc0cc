"""The one family of errors fairq raises.

Every refusal is a FairqError subclass whose docstring is its default message;
data about the refusal rides on attributes (``err.event_id``, ``err.field``).
This module must not import anything else from fairq.

No ``sqlite3`` error of fairq's own statements escapes a public call: a lock
timeout becomes Busy, a full disk DiskFull, a file that cannot be written
ReadOnly, a damaged file Corrupt, and any other failure (a constraint, a
trigger, a disk error) a plain StoreError -- never a success or a retry --
the driver's error kept as ``__cause__``. What an application's own callback
raises (a settle effect, an Inbox apply) reaches the caller as it is.

TransientError marks the refusals that a later identical call may not meet
(Busy, Unavailable); UsageError marks a programming mistake.
"""

from __future__ import annotations

__all__ = [
    "FairqError",
    "InvalidInput",
    "UnknownSchedule",
    "Conflict",
    "LeaseLost",
    "StaleLease",
    "LeaseExpired",
    "RedriveRefused",
    "ClockError",
    "TransientError",
    "Busy",
    "SchemaError",
    "StoreError",
    "DiskFull",
    "ReadOnly",
    "Corrupt",
    "UsageError",
    "Unavailable",
    "RemoteError",
    "PolicyMismatch",
    "ResultNotReady",
]


class FairqError(Exception):
    """fairq refused the operation."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip().splitlines()[0])


class InvalidInput(FairqError, ValueError):
    """An argument is not acceptable; nothing was written.

    `line` is set when the input came from a file (Queue.ingest): the
    1-based line the problem is on.
    """

    def __init__(self, field: str, problem: str, *, line: int | None = None) -> None:
        self.field = field
        self.problem = problem
        self.line = line
        super().__init__(f"{_at(line)}{field}: {problem}")

    def within(self, container: str) -> InvalidInput:
        """The same refusal, its field named inside `container` (e.g. "items[3]");
        a refusal of the whole item (field "") becomes the container's own."""
        return InvalidInput(f"{container}.{self.field}" if self.field else container, self.problem)


class UnknownSchedule(InvalidInput):
    """No schedule is called that (get, remove, pause, resume); nothing was written.

    An InvalidInput whose field is "name", so code that catches InvalidInput
    keeps working; `fairq serve` answers it with 404 rather than 400.
    """


class Conflict(FairqError):
    """The event id is already stored with a different flow, body, tenant or kind; nothing was written.

    `line` is set when the input came from a file (Queue.ingest): the line
    that conflicts.
    """

    def __init__(self, event_id: str, field: str, message: str | None = None, *,
                 line: int | None = None) -> None:
        self.event_id = event_id
        self.field = field
        self.line = line
        super().__init__(
            _at(line) + (message or f"event {event_id!r} is already stored with a different {field}")
        )


class LeaseLost(FairqError):
    """The lease no longer entitles its holder to settle or extend the event."""

    def __init__(self, event_id: str, generation: int, message: str | None = None) -> None:
        self.event_id = event_id
        self.generation = generation
        super().__init__(message)


class StaleLease(LeaseLost):
    """The event was claimed again, redriven or settled since this lease was granted."""


class LeaseExpired(LeaseLost):
    """The lease ran out (now >= lease_until) before the holder settled or extended it."""


class RedriveRefused(FairqError):
    """Redrive needs a quarantined event at the expected generation."""

    def __init__(self, event_id: str, message: str | None = None) -> None:
        self.event_id = event_id
        super().__init__(message)


class ResultNotReady(FairqError):
    """The event has no result to give: it is not acked (or no such event is stored).

    `state` is the event's fairq.State (None: no such event, or it was
    purged); `reason` its stored reason (a quarantine's or a discard's), if any.
    """

    def __init__(self, event_id: str, state: object | None, reason: str | None = None) -> None:
        self.event_id = event_id
        self.state = state
        self.reason = reason
        if state is None:
            message = f"no event {event_id!r} is stored (never enqueued, or purged)"
        else:
            name = getattr(state, "value", state)
            message = f"event {event_id!r} is {name}, not acked" + (f": {reason}" if reason else "")
        super().__init__(message)


class ClockError(FairqError):
    """An explicit `now` is earlier than the queue's stored clock."""

    def __init__(self, now: float, stored: float) -> None:
        self.now = now
        self.stored = stored
        super().__init__(
            f"now={now!r} is earlier than the queue's clock {stored!r}; "
            "the clock never goes back"
        )


class TransientError(FairqError):
    """The call met a passing condition (a lock held too long, a server out of reach); it may be made again."""


class Busy(TransientError):
    """The database stayed locked by another writer past the busy timeout; nothing was written."""


class SchemaError(FairqError):
    """The file cannot be opened as a fairq database."""


class StoreError(FairqError):
    """The database file failed under the call; what it wrote, if anything, was rolled back.

    The driver's error is kept as ``__cause__``; `path` is the file.
    """

    def __init__(self, path: object, message: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class DiskFull(StoreError):
    """The disk (or the file's size limit) is full; nothing was written: free space and call again."""


class ReadOnly(StoreError):
    """The file cannot be written (read-only file, folder or filesystem, or a read-only queue)."""


class Corrupt(StoreError, SchemaError):
    """The file is damaged; restore it from a backup (sqlite3's .recover may save rows)."""


class UsageError(FairqError):
    """The call cannot be made in this state (e.g. on a closed Queue); nothing was written.

    Also raised for a call made from inside its own settle effect or Inbox
    apply, and for a callback that ends the transaction it runs in.
    """


def _at(line: int | None) -> str:
    return "" if line is None else f"line {line}: "


class Unavailable(TransientError):
    """The fairq server could not be reached or did not answer; the call may or may not have taken effect."""

    def __init__(self, url: str, message: str | None = None) -> None:
        self.url = url
        super().__init__(message)


class RemoteError(FairqError):
    """The fairq server refused the request for a reason a local Queue never has."""

    def __init__(self, status: int, code: str, message: str | None = None) -> None:
        self.status = status
        self.code = code
        super().__init__(message)


class PolicyMismatch(FairqError):
    """The queue stores another retry policy than the one given; nothing was written.

    `field` is max_attempts, backoff or lease_seconds; `stored` and `given`
    are its two values. Open the queue without that argument to use the
    stored policy, or change the stored one with Queue.set_policy
    (`fairq policy set`), which every process then follows.
    """

    def __init__(self, field: str, stored: object, given: object) -> None:
        self.field = field
        self.stored = stored
        self.given = given
        super().__init__(
            f"{field}: the queue stores {stored!r}, {given!r} was given; open it without "
            f"{field} to use the stored policy, or change it with Queue.set_policy(...) "
            f"or `fairq policy set ... --reason TEXT` (see `fairq policy show`)"
        )
