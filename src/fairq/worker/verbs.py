"""The queue verbs a worker calls (QueueVerbs), which a Queue and a Client both serve.

One verb is optional (WaitsForWork): a queue that has wait_for_work lets an
idle worker sleep until new work may be claimable; without it the worker polls.
"""

from __future__ import annotations

from collections.abc import Iterable
import threading
from typing import Any, Protocol

from ..errors import InvalidInput, LeaseLost
from ..types import Enqueued, Lease, Settled, Stats

#: The verbs every worker calls; tick only with tick=True, settings() only with processes=True.
REQUIRED = ("claim_many", "settle_many", "extend", "stats")


class QueueVerbs(Protocol):
    """What a Worker needs of its queue: a fairq.Queue, a fairq.Client, or anything alike."""

    @property
    def lease_seconds(self) -> float:
        """The lease a claim asks for when the call names none (read only)."""
        ...

    def claim_many(self, n: int, *, owner: str | None = ..., lease_seconds: float | None = ...) -> list[Lease]: ...

    def settle_many(self, items: Iterable[Any]) -> list[Settled | LeaseLost]: ...

    def extend(self, lease: Lease, seconds: float | None = ...) -> Lease: ...

    def stats(self, *, top: int = ...) -> Stats: ...

    def tick(self) -> list[Enqueued]: ...

    def settings(self) -> dict[str, Any]: ...


class WaitsForWork(Protocol):
    """The optional verb of QueueVerbs: fairq.Queue has it, fairq.Client does not."""

    def wait_for_work(self, timeout: float, stop: threading.Event | None = ...) -> bool:
        """Sleep up to `timeout` s, less when work may be claimable or `stop` is set; True
        when the wait listened for new work the whole time (no need to poll)."""
        ...


def waiter(queue: Any) -> WaitsForWork | None:
    """The queue, if it has the optional wait_for_work verb; else None (the worker polls)."""
    return queue if callable(getattr(queue, "wait_for_work", None)) else None


def check_queue(queue: Any, *, tick: bool) -> QueueVerbs:
    """The queue, if it has the verbs a worker calls; else InvalidInput naming the first one missing."""
    for verb in REQUIRED + (("tick",) if tick else ()):
        if not callable(getattr(queue, verb, None)):
            raise InvalidInput("queue", f"must be a fairq.Queue or fairq.Client (a {type(queue).__name__} "
                                        f"has no {verb}())")
    if not isinstance(getattr(queue, "lease_seconds", None), (int, float)):
        raise InvalidInput("queue", f"must be a fairq.Queue or fairq.Client (a {type(queue).__name__} "
                                    "has no lease_seconds)")
    return queue  # type: ignore[no-any-return]
