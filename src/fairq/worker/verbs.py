"""The queue verbs a worker calls (QueueVerbs), which a Queue and a Client both serve."""

from __future__ import annotations

from collections.abc import Iterable
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
