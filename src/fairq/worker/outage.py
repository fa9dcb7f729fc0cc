"""How a worker waits out a queue out of reach (Unavailable): log, back off, reconnect.

A round that meets Unavailable (the database server restarted, a connection
was cut, a fairq server did not answer) is logged and waited out; then, if the
queue can reconnect (fairq.Queue.reconnect), one thread of the worker opens a
new connection for all of them: a thread whose round began before another
thread's reconnection does not reconnect again. No SQL and no queue rule here.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..errors import Unavailable

log = logging.getLogger("fairq.worker")


class Outage:
    """The reconnections of one worker's queue."""

    def __init__(self, queue: Any) -> None:
        self._reconnect = getattr(queue, "reconnect", None)
        self._lock = threading.Lock()
        self.reconnects = 0  # made so far; a round notes the count when it begins

    def recover(self, exc: Unavailable, seen: int, stop: threading.Event, pause: float) -> None:
        """After a round begun when `seen` reconnections were made met `exc`: wait
        `pause` seconds (a stop ends it), then reconnect unless another thread did."""
        log.warning("queue.unavailable error=%r retry_in=%.3f", str(exc), pause)
        stop.wait(pause)
        if self._reconnect is None or stop.is_set():
            return
        with self._lock:
            if self.reconnects != seen:
                return
            try:
                self._reconnect()
            except Unavailable as again:
                log.warning("queue.reconnect_failed error=%r", str(again))
                return
            self.reconnects += 1
        log.info("queue.reconnected reconnects=%d", self.reconnects)
