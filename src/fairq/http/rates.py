"""Claims and acks per minute, for the console's Overview: sampled, kept in memory.

The database keeps running totals (Stats.totals), not a history of them, so
a server samples `claimed` and `acked` from `Queue.stats()` about every
`seconds` on its own thread and keeps the last hour of samples. A minute's
rate is the growth of a total between the last sample of the minute before
and the last sample of that minute (spread evenly over the minutes between
when samples are missing). Nothing is written; a restarted server starts
with no history. A failed sample is logged and skipped. Nothing here knows
about HTTP (fairq.http.server starts and stops it).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any

__all__ = ["Rates", "DEFAULT_SAMPLE_SECONDS", "per_minute"]

log = logging.getLogger("fairq")

#: Seconds between two samples of a server's totals.
DEFAULT_SAMPLE_SECONDS = 10.0
#: Minutes of samples kept.
KEEP_MINUTES = 60

Sample = tuple[float, int, int]  # (queue clock seconds, claimed total, acked total)


class Rates:
    """Samples `queue.stats()` totals every `seconds` on its own thread between start() and stop()."""

    def __init__(self, queue: Any, seconds: float = DEFAULT_SAMPLE_SECONDS) -> None:
        self._queue = queue
        self._seconds = seconds
        self._lock = threading.Lock()
        self._samples: collections.deque[Sample] = collections.deque()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fairq-rates", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; returns once a sample under way has finished."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def samples(self) -> int:
        """Samples kept now."""
        with self._lock:
            return len(self._samples)

    def record(self, at: float, claimed: int, acked: int) -> None:
        """Keep one sample of the totals taken at `at`; samples older than the kept hour go."""
        with self._lock:
            self._samples.append((at, claimed, acked))
            while self._samples and self._samples[0][0] < at - (KEEP_MINUTES + 1) * 60:
                self._samples.popleft()

    def sample(self) -> None:
        """Record the queue's totals now."""
        stats = self._queue.stats(top=0)
        self.record(stats.now, stats.totals["claimed"], stats.totals["acked"])

    def answer(self) -> dict[str, Any]:
        """The JSON the rates endpoint answers: per-minute rates and the sampling period."""
        with self._lock:
            samples = list(self._samples)
        return {"sample_seconds": self._seconds, "minutes": per_minute(samples)}

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.sample()
            except Exception:
                log.debug("rates: a sample failed; sampling again in %g s", self._seconds, exc_info=True)
            self._stopped.wait(self._seconds)


def per_minute(samples: list[Sample]) -> list[dict[str, Any]]:
    """{"minute": start in seconds, "claimed": n, "acked": n} for each minute
    whose growth is known (a sample in it and one in an earlier minute)."""
    last: dict[int, Sample] = {}
    for sample in samples:
        last[int(sample[0] // 60)] = sample  # samples arrive in time order
    minutes = sorted(last)
    out = []
    for before, minute in zip(minutes, minutes[1:]):
        span = minute - before
        _, claimed0, acked0 = last[before]
        _, claimed1, acked1 = last[minute]
        for m in range(max(before + 1, minute - KEEP_MINUTES), minute + 1):
            out.append({"minute": m * 60, "claimed": (claimed1 - claimed0) / span,
                        "acked": (acked1 - acked0) / span})
    return out[-KEEP_MINUTES:]
