"""fairq for asyncio: ``import fairq.aio``.

AsyncQueue (every Queue verb as a coroutine, on the queue's own threads,
``q.schedules`` included), AsyncClient (every Client verb, the same way over
a `fairq serve`), and AsyncWorker (coroutine handlers as tasks). Handlers meet the same fairq.Job and raise the same
fairq.Retry and fairq.Fail as with fairq.Worker. See docs/asyncio.md.
"""

from __future__ import annotations

from ..http.client import Client
from ..api.queue import Queue
from .client import AsyncClient
from .job import AsyncJob, check_async_handler
from .queue import AsyncQueue
from .worker import AsyncWorker

__all__ = ["AsyncQueue", "AsyncClient", "AsyncWorker", "AsyncJob", "check_async_handler", "wrap"]


def wrap(queue: Queue | Client) -> AsyncQueue | AsyncClient:
    """The async facade of an open Queue or Client (which it then owns and closes)."""
    return AsyncClient(queue) if isinstance(queue, Client) else AsyncQueue(queue)
