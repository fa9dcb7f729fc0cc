"""The schedule ticker a server runs beside its requests: `Queue.tick()` about every second.

A tick decides each due slot once, in its own transaction, so ticking here
is safe beside `fairq tick`, other servers and other processes on the same
file: whoever ticks first creates an instance, the others find it decided.
A tick that fails (the database stayed locked, or any other error) is
logged to the "fairq" logger and made again at the next beat; it changed
nothing, and the slot is decided by a later tick. Nothing here knows about
HTTP (fairq.http.server starts and stops it).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..errors import Busy

__all__ = ["Ticker", "DEFAULT_TICK_SECONDS"]

log = logging.getLogger("fairq")

#: Seconds between two ticks of a server's schedules.
DEFAULT_TICK_SECONDS = 1.0


class Ticker:
    """Calls `queue.tick()` every `seconds` on its own thread between start() and stop()."""

    def __init__(self, queue: Any, seconds: float = DEFAULT_TICK_SECONDS) -> None:
        self._queue = queue
        self._seconds = seconds
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fairq-ticker", daemon=True)
        #: Ticks made since start().
        self.ticks = 0

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        """Is the ticking thread alive?"""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop ticking; returns once a tick under way has finished."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                done = self._queue.tick()
            except Busy:
                log.debug("tick: the database is busy; ticking again in %g s", self._seconds)
            except Exception:
                log.exception("tick failed; ticking again in %g s", self._seconds)
            else:
                self.ticks += 1
                if done:
                    log.info("tick: enqueued %d instances", len(done))
            self._stopped.wait(self._seconds)
