"""What a worker counts (COUNTS) and the tally its threads and processes share."""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..types import Outcome, State
from .job import Handled, Job

log = logging.getLogger("fairq.worker")

#: What a worker counts; Worker.counts() and run() return these keys.
COUNTS = ("claimed", "acked", "retried", "released", "quarantined", "lost", "abandoned")
#: The count a settled event adds to, by the state it was settled into.
COUNT_FOR = {State.ACKED: "acked", State.READY: "retried", State.QUARANTINED: "quarantined"}


class Tally:
    """The COUNTS of a worker, shared by its threads (and, given a shared
    multiprocessing array, by its processes). Each count also goes to
    `parent`, if given (a child process's own tally feeds its parent's)."""

    def __init__(self, shared: Any = None, parent: Tally | None = None) -> None:
        self.values = shared if shared is not None else [0] * len(COUNTS)
        self._lock = shared.get_lock() if shared is not None else threading.Lock()
        self._parent = parent

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.values[COUNTS.index(name)] += n
        if self._parent is not None:
            self._parent.add(name, n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(zip(COUNTS, self.values[:]))


def count(tally: Tally, job: Job, h: Handled) -> None:
    """Count and log one handled job: lost (not settled), or what its settle made of it."""
    if h.settled is None:
        tally.add("lost")
        log.warning("lease.lost event_id=%s outcome=%s error=%r", h.event_id, h.outcome, str(h.lost))
        return
    tally.add("released" if h.outcome is Outcome.RELEASE else COUNT_FOR[h.settled.state])
    if h.settled.state is State.QUARANTINED:
        log.error("event.quarantined event_id=%s attempts=%d reason=%r", h.event_id, job.attempts, h.reason)
    else:
        log.debug("settled event_id=%s outcome=%s state=%s", h.event_id, h.outcome, h.settled.state)

