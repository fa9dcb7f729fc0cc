"""The async facade: each verb of a sync queue object as a coroutine that runs
it on the object's own thread (fairq.aio._thread). One copy of every verb:
`enqueue = verb(Queue.enqueue)` forwards to the sync method, so the sync
code stays the only implementation. Each forwarded verb is one of the verb
table (fairq.api.verbs); a verb the table marks as claiming (claim,
claim_many) gives its leases back when the awaiting task is cancelled after
it committed.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from .. import _validate as v
from ..api.verbs import claims
from ..types import Lease, Outcome
from ._thread import DbThread



class Sync(Protocol):
    """What a facade's sync object (a Queue or a Client) has that the facade reads or calls."""

    @property
    def lease_seconds(self) -> float: ...
    def settings(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    def settle_many(self, items: Any) -> Any: ...


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T", bound=Sync)
Verb = Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]


class Facade(Generic[T]):
    """Owns a sync queue object (`sync`) and its thread; closes both on close() / ``async with``."""

    def __init__(self, sync: T, thread_name: str, threads: int = 1) -> None:
        self.sync = sync
        self._thread = DbThread(thread_name, threads)

    async def run(self, fn: Callable[Concatenate[T, P], R], *args: P.args, **kw: P.kwargs) -> R:
        """fn(sync, *args, **kw) on the database thread: any sync call the facade does not wrap,
        e.g. ``await q.run(lambda queue: queue.schedules.add(...))``."""
        return await self._thread.call(functools.partial(fn, self.sync, *args, **kw))

    async def close(self) -> None:
        """Close the sync object on its thread, then let the thread end."""
        try:
            await self._thread.call(self.sync.close)
        finally:
            self._thread.close()

    @property
    def lease_seconds(self) -> float:
        """The lease a claim asks for when the call names none: the Client's, or the
        Queue's stored lease, read on the calling thread (on PostgreSQL a round trip to
        the server: inside a coroutine, read it once or through run())."""
        return self.sync.lease_seconds

    def settings(self) -> dict[str, Any]:
        """The sync object's settings(): the options that open it again the same way."""
        return self.sync.settings()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _give_back(self, leases: list[Lease]) -> None:
        """Release leases a cancelled claim took: ready again at once, no attempt spent."""
        if leases:
            items = [(lease, Outcome.RELEASE) for lease in leases]
            await self._thread.call(functools.partial(self.sync.settle_many, items))


def verb(method: Callable[Concatenate[Any, P], R]) -> Verb[P, R]:
    """The coroutine form of the sync verb `method` (by name, one of the verb table):
    same arguments, same result, run on the thread. A claiming verb cancelled after it
    committed releases its leases (no attempt spent) before CancelledError is raised,
    so no event is left inflight unheld."""

    name = method.__name__  # looked up on the object, so a subclass's override is the one run
    if claims(name):
        return _named(_claiming(name), method)

    async def call(self: Facade[Any], /, *args: P.args, **kw: P.kwargs) -> R:
        return await self._thread.call(functools.partial(getattr(self.sync, name), *args, **kw))

    return _named(call, method)


def loose_verb(method: Callable[..., R]) -> Callable[..., Coroutine[Any, Any, R]]:
    """verb() for a method taking **kw (ack, retry, fail, release): typed loosely."""
    return verb(method)


#: Seconds of one slice of an async wait: a cancelled wait leaves at most this
#: much of a sync wait running on its own thread.
WAIT_SLICE = 1.0


def waiting(method: Callable[..., R]) -> Callable[..., Coroutine[Any, Any, R]]:
    """The coroutine form of a blocking wait (Queue.wait, Client.wait): the sync
    wait run in slices of at most WAIT_SLICE seconds, each on a thread of its own
    (never the object's: its other calls go on meanwhile), until the timeout."""
    name = method.__name__

    async def call(self: Facade[Any], event_id: str, *, timeout: float) -> R:
        timeout = v.seconds(timeout, "timeout")  # as the sync wait checks it, before any thread starts
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        sync_wait = getattr(self.sync, name)
        while True:
            ask = max(0.0, min(deadline - loop.time(), WAIT_SLICE))
            try:
                result: R = await asyncio.to_thread(sync_wait, event_id, timeout=ask)
                return result
            except TimeoutError:
                if loop.time() >= deadline:
                    raise

    return _named(call, method)


def _claiming(name: str) -> Verb[Any, Any]:
    async def call(self: Facade[Any], /, *args: Any, **kw: Any) -> Any:
        async def give_back(result: Any) -> None:
            await self._give_back(result if isinstance(result, list) else [] if result is None else [result])

        return await self._thread.call(functools.partial(getattr(self.sync, name), *args, **kw), on_cancel=give_back)

    return call


def _named(call: Verb[P, R], method: Callable[..., Any]) -> Verb[P, R]:
    """The coroutine wears the sync method's name and docstring."""
    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    return call
