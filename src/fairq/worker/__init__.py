"""The worker: claim, run a handler, settle; heartbeats, timeouts, stop modes and graceful stop.

A handler is a plain function of one Job. Returning settles its event as
ack; raising Retry(reason, delay=None), Fail(reason) or Release() settles it
as retry, fail or release; any other exception, and a returned awaitable, is a retry. Async
handlers, and handlers that cannot take a Job, are refused when the Worker
is built. Modules: job (what a handler meets), handler (the contract),
heartbeat (leases and timeouts), core (the rounds, claims, settles, stop
modes, backoff and ticking, for threads and asyncio alike), threads
(Worker: the core driven by threads), processes (run in child processes),
signals, counts, verbs (the queue verbs a worker needs). No SQL, no policy here.
"""

from __future__ import annotations

from .counts import COUNTS
from .handler import check_handler
from .heartbeat import Heartbeat
from .job import Fail, Handled, Job, Release, Retry, describe
from .threads import Worker
from .settings import default_owner
from .signals import StopSignals
from .verbs import QueueVerbs

__all__ = ["Worker", "Job", "Handled", "Retry", "Fail", "Release", "QueueVerbs", "COUNTS", "Heartbeat", "StopSignals",
           "check_handler", "default_owner", "describe"]
