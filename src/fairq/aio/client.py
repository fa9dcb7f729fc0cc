"""AsyncClient: every fairq.Client verb as a coroutine, run on one thread per client.

The same facade as AsyncQueue (fairq.aio._facade) over the HTTP client, with
``schedules`` (fairq.aio.schedules): no new dependency, one copy of every verb.
"""

from __future__ import annotations

from typing import Any

from ..http.client import Client
from ._facade import Facade, loose_verb, verb, waiting
from .schedules import AsyncSchedules


class AsyncClient(Facade[Client]):
    """``async with fairq.aio.AsyncClient(url, token=...) as c: await c.enqueue(...)``.

    url and options open a fairq.Client (the same arguments); or pass a
    Client, which the AsyncClient then owns and closes. Calls take turns on
    the client's own thread; a cancelled claim releases the leases it took
    once the server answered. `sync` is the Client.
    """

    def __init__(self, url: Any = None, **options: Any) -> None:
        client = url if isinstance(url, Client) and not options else Client(url, **options)
        super().__init__(client, "fairq-http")
        self.url = client.url

    async def __aenter__(self) -> AsyncClient:
        return self

    @property
    def schedules(self) -> AsyncSchedules:
        """The server's periodic schedules: each method of Client.schedules as a coroutine."""
        return AsyncSchedules(self)

    enqueue = verb(Client.enqueue)
    enqueue_many = verb(Client.enqueue_many)
    claim = verb(Client.claim)
    claim_many = verb(Client.claim_many)
    settle = verb(Client.settle)
    ack = loose_verb(Client.ack)
    retry = loose_verb(Client.retry)
    fail = loose_verb(Client.fail)
    release = loose_verb(Client.release)
    settle_many = verb(Client.settle_many)
    extend = verb(Client.extend)
    redrive = verb(Client.redrive)
    redrive_many = verb(Client.redrive_many)
    flows = verb(Client.flows)
    set_weight = verb(Client.set_weight)
    discard = verb(Client.discard)
    discard_many = verb(Client.discard_many)
    pause = verb(Client.pause)
    resume = verb(Client.resume)
    set_tenant = verb(Client.set_tenant)
    tenants = verb(Client.tenants)
    tick = verb(Client.tick)
    get = verb(Client.get)
    result = verb(Client.result)
    wait = waiting(Client.wait)
    events = verb(Client.events)
    audit = verb(Client.audit)
    why_blocked = verb(Client.why_blocked)
    stats = verb(Client.stats)
