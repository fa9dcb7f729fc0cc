"""AsyncQueue: every fairq.Queue verb as a coroutine, run on the queue's own threads.

Nothing here re-implements a verb: each attribute forwards to the same
method of the fairq.Queue it owns (fairq.aio._facade), and ``schedules`` to
its schedules (fairq.aio.schedules). The verbs are those of the verb table
(fairq.api.verbs) but the few it says why an async class leaves out.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidInput
from ..api.queue import Queue
from ._facade import Facade, loose_verb, verb, waiting
from .schedules import AsyncSchedules


class AsyncQueue(Facade[Queue]):
    """``async with fairq.aio.AsyncQueue(path, **options) as q: await q.enqueue(...)``.

    path and options open a fairq.Queue (the same arguments); or pass an open
    Queue, which the AsyncQueue then owns and closes. Every call runs on this
    queue's own threads (one on SQLite; on PostgreSQL one per connection of
    its pool, so calls of concurrent tasks run at once), in a copy of the caller's contextvars;
    settle effects run there too, inside the settle's transaction. A call
    whose awaiting task is cancelled still completes (a transaction cannot be
    stopped halfway); a cancelled claim or claim_many then releases the
    leases it took before CancelledError is raised. `sync` is the Queue.
    """

    def __init__(self, path: Any, **options: Any) -> None:
        if isinstance(path, Queue) and options:
            raise InvalidInput("options", f"an open Queue is used as it is; got {', '.join(sorted(options))}")
        queue = path if isinstance(path, Queue) else Queue(path, **options)
        super().__init__(queue, f"fairq-db-{os.path.basename(os.fspath(queue.path))}", queue.parallel_calls)
        self.path = queue.path

    async def __aenter__(self) -> AsyncQueue:
        return self

    @property
    def schedules(self) -> AsyncSchedules:
        """The queue's periodic schedules: each method of Queue.schedules as a coroutine."""
        return AsyncSchedules(self)

    enqueue = verb(Queue.enqueue)
    enqueue_many = verb(Queue.enqueue_many)
    claim = verb(Queue.claim)
    claim_many = verb(Queue.claim_many)
    settle = verb(Queue.settle)
    ack = loose_verb(Queue.ack)
    retry = loose_verb(Queue.retry)
    fail = loose_verb(Queue.fail)
    release = loose_verb(Queue.release)
    settle_many = verb(Queue.settle_many)
    extend = verb(Queue.extend)
    redrive = verb(Queue.redrive)
    redrive_many = verb(Queue.redrive_many)
    flows = verb(Queue.flows)
    tick = verb(Queue.tick)
    get = verb(Queue.get)
    result = verb(Queue.result)
    wait = waiting(Queue.wait)
    events = verb(Queue.events)
    audit = verb(Queue.audit)
    stats = verb(Queue.stats)
    why_blocked = verb(Queue.why_blocked)
    policy = verb(Queue.policy)
    set_policy = verb(Queue.set_policy)
    set_weight = verb(Queue.set_weight)
    discard = verb(Queue.discard)
    discard_many = verb(Queue.discard_many)
    pause = verb(Queue.pause)
    resume = verb(Queue.resume)
    set_tenant = verb(Queue.set_tenant)
    tenants = verb(Queue.tenants)
    reset_clock = verb(Queue.reset_clock)
    purge = verb(Queue.purge)
