"""What a drain's backends wait on: pg_stat_activity sampled every ~10 ms.

WaitSampler(url, application_name) runs in a thread on its own autocommit
connection (through the drain's delay proxy, if any) and, every
`interval` seconds, reads wait_event_type and wait_event of every backend
whose application_name is the drain's. summary(claims) gives:
  backend_samples  backends seen, summed over samples
  lock_samples     of those, how many waited on a heavyweight lock
                   (wait_event_type = 'Lock': a row, tuple or transaction id
                   another backend holds)
  lock_samples_per_claim   lock_samples / claims (depends on the sampling rate)
  lock_wait_ms_per_claim   lock_samples x the mean sampling interval / claims:
                   an estimate of the time backends spent waiting for locks per claim
  lock_share       lock_samples / backend_samples
  top              the commonest "type:event" pairs; "active:on CPU" is a
                   backend running, "Client:ClientRead" one waiting for its client
  probe_ms_median  (merge) a `SELECT 1` the sampler times before each
                   sample, through the drain's delay proxy: the round trip a
                   request really saw during the drain (delay and queueing)
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from typing import Any

# The drain's backends, not the sampler's own.
ACTIVITY = ("SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
            "WHERE application_name = %(app)s AND pid <> pg_backend_pid()")


class WaitSampler:
    """Samples the drain's backends until stop(); a context manager."""

    def __init__(self, url: str, application_name: str, interval: float = 0.01) -> None:
        import psycopg

        self.app = application_name
        self.interval = interval
        self.conn = psycopg.connect(url, autocommit=True)
        self.events: Counter[str] = Counter()
        self.samples = 0
        self.probe_ms: list[float] = []
        self.began = self.ended = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wait-sampler", daemon=True)

    def __enter__(self) -> WaitSampler:
        self.began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.ended = time.monotonic()
        self.conn.close()

    def _run(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            asked = time.perf_counter()
            self.conn.execute("SELECT 1").fetchone()
            self.probe_ms.append((time.perf_counter() - asked) * 1000)
            rows = self.conn.execute(ACTIVITY, {"app": self.app}).fetchall()
            for state, kind, event in rows:
                if kind is None:
                    self.events[f"{state}:on CPU" if state == "active" else f"{state}:-"] += 1
                else:
                    self.events[f"{kind}:{event}"] += 1
            self.samples += 1
            tick += self.interval
            self._stop.wait(max(0.0, tick - time.monotonic()))

    def summary(self, claims: int) -> dict[str, Any]:
        backends = sum(self.events.values())
        locks = sum(n for key, n in self.events.items() if key.startswith("Lock:"))
        mean_interval_ms = (self.ended - self.began) * 1000 / max(1, self.samples)
        return {"samples": self.samples, "mean_interval_ms": mean_interval_ms, "claims": claims,
                "probe_ms": self.probe_ms,
                "backend_samples": backends, "lock_samples": locks,
                "lock_samples_per_claim": locks / max(1, claims),
                "lock_wait_ms_per_claim": locks * mean_interval_ms / max(1, claims),
                "lock_share": locks / max(1, backends),
                "events": dict(self.events), "top": self.events.most_common(4)}


def merge(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' summaries as one (sums, then the ratios again)."""
    events: Counter[str] = Counter()
    for s in summaries:
        events.update(s["events"])
    claims = sum(s["claims"] for s in summaries)
    locks = sum(s["lock_samples"] for s in summaries)
    backends = sum(s["backend_samples"] for s in summaries)
    samples = sum(s["samples"] for s in summaries)
    probe_ms = [ms for s in summaries for ms in s["probe_ms"]]
    waited_ms = sum(s["lock_samples"] * s["mean_interval_ms"] for s in summaries)
    return {"runs": len(summaries), "samples": samples, "claims": claims, "backend_samples": backends,
            "lock_samples": locks, "lock_samples_per_claim": locks / max(1, claims),
            "lock_wait_ms_per_claim": waited_ms / max(1, claims), "lock_share": locks / max(1, backends),
            "mean_interval_ms": sum(s["mean_interval_ms"] * s["samples"] for s in summaries) / max(1, samples),
            "probe_ms_median": statistics.median(probe_ms) if probe_ms else 0.0,
            "events": dict(events), "top": events.most_common(4)}
