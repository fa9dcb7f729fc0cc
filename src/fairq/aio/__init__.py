"""fairq for asyncio: ``import fairq.aio``.

AsyncQueue (every Queue verb as a coroutine, on one thread per queue),
AsyncClient (the same over a `fairq serve`), and AsyncWorker (coroutine
handlers as tasks). Handlers meet the same fairq.Job and raise the same
fairq.Retry and fairq.Fail as with fairq.Worker. See docs/asyncio.md.
"""

from __future__ import annotations

from .job import AsyncJob
from .queue import AsyncQueue
from .worker import AsyncWorker

__all__ = ["AsyncQueue", "AsyncWorker", "AsyncJob"]
