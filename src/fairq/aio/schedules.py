"""``q.schedules`` of an AsyncQueue or AsyncClient: each method of the sync
object's schedules (fairq.Queue.schedules, fairq.Client.schedules) as a
coroutine run on the facade's thread. Nothing is re-implemented: each
method forwards by name, and each is a verb of the table (fairq.api.verbs).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..api.verbs import VERBS
from ..schedules import Schedules
from ._facade import Facade

__all__ = ["AsyncSchedules"]

P = ParamSpec("P")
R = TypeVar("R")


def _forward(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The coroutine form of a schedules method: same arguments, same result, run on the facade's thread."""
    name = method.__name__
    if f"schedules.{name}" not in VERBS:
        raise KeyError(f"schedules.{name} is not in the verb table (fairq.api.verbs)")

    async def call(self: AsyncSchedules, /, *args: P.args, **kw: P.kwargs) -> R:
        return await self.facade.run(lambda sync: getattr(sync.schedules, name)(*args, **kw))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call


class AsyncSchedules:
    """The periodic schedules of an AsyncQueue's Queue or an AsyncClient's
    Client: ``await q.schedules.add("nightly", cron="0 3 * * *")``. The same
    arguments, values and errors as ``queue.schedules``."""

    def __init__(self, facade: Facade[Any]) -> None:
        self.facade = facade

    add = _forward(Schedules.add)
    get = _forward(Schedules.get)
    list = _forward(Schedules.list)
    misfires = _forward(Schedules.misfires)
    remove = _forward(Schedules.remove)
    pause = _forward(Schedules.pause)
    resume = _forward(Schedules.resume)
