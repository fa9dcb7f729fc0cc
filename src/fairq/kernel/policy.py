"""Pure decisions: retry backoff, the settle decision, stride sizes, the claim-lag
histogram, the time a call runs at. (The other rules: fairq.kernel.rules.)

Nothing here reads a clock or touches a database, so every decision can be
tested and replayed exactly.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import ClockError, InvalidInput
from ..types import Outcome, State

__all__ = [
    "Backoff",
    "jitter_draw",
    "Decision",
    "decide",
    "effective_now",
    "DEFAULT_MAX_CLOCK_SKEW",
    "stride",
    "STRIDE_UNIT",
    "MAX_WEIGHT",
    "to_ms",
    "from_ms",
    "CLAIM_LAG_BOUNDS_MS",
    "CLAIM_LAG_BUCKETS",
    "lag_bucket",
    "lag_counts",
    "lag_quantile",
    "Policy",
    "DEFAULT_MAX_ATTEMPTS",
    "policy_json",
    "POLICY_ROW",
    "policy_from_row",
    "policy_params",
    "DEFAULT_LEASE_SECONDS",
    "backoff_text",
    "backoff_from_text",
    "own_budget",
]

#: A weight-1 flow moves this far along the rotation per claim; a weight-w flow
#: moves STRIDE_UNIT // w. 720720 is divisible by every weight from 1 to 16, so
#: those ratios are exact; heavier weights round down by less than 0.2 %.
STRIDE_UNIT = 720_720
MAX_WEIGHT = 1000


def stride(weight: int) -> int:
    """How far one claim moves a flow of this weight along the rotation."""
    return STRIDE_UNIT // weight


#: Upper bounds (ms) of the claim-lag histogram buckets; a last bucket holds
#: everything slower. Chosen to answer SLOs like "99% claimed within 10 s".
CLAIM_LAG_BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000,
                       60_000, 300_000, 900_000, 3_600_000)
#: The histogram's buckets: one per bound, and one past the last.
CLAIM_LAG_BUCKETS = len(CLAIM_LAG_BOUNDS_MS) + 1


def lag_bucket(lag_ms: int) -> int:
    """The histogram bucket a claim lag falls in (len(bounds) for the unbounded one)."""
    return bisect.bisect_left(CLAIM_LAG_BOUNDS_MS, lag_ms)


def lag_counts(stored: str) -> list[int]:
    """The histogram's bucket counts from their stored JSON, one per bucket
    (a file written with fewer buckets gets zeros for the new ones)."""
    counts: list[int] = json.loads(stored)
    return counts + [0] * (CLAIM_LAG_BUCKETS - len(counts))


def lag_quantile(counts: list[int], q: float) -> float | None:
    """The upper bound (seconds) of the bucket holding quantile q; inf past the last bound."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        seen += n
        if seen >= rank and n:
            return CLAIM_LAG_BOUNDS_MS[i] / 1000 if i < len(CLAIM_LAG_BOUNDS_MS) else math.inf
    return math.inf


def to_ms(seconds: float) -> int:
    """Queue-clock seconds -> stored integer milliseconds."""
    return round(seconds * 1000)


def from_ms(ms: int | None) -> float | None:
    """Stored integer milliseconds -> queue-clock seconds."""
    return None if ms is None else ms / 1000


#: How far ahead of the system clock an explicit `now` may be, by default:
#: five minutes, the usual bound for hosts kept in step by NTP (Kerberos uses
#: the same). Larger than any correction NTP makes by slewing or a routine
#: step, far smaller than a day: a mistaken time (a wall clock a day ahead, a
#: typo in --now) is refused instead of freezing every lease and backoff.
DEFAULT_MAX_CLOCK_SKEW = 300.0


def effective_now(requested_ms: int, stored_ms: int, *, explicit: bool) -> int:
    """The time a call runs at, given the queue's stored clock.

    An explicit time earlier than the stored clock is refused (ClockError); a
    system clock reading that stepped back is clamped to the stored clock.
    """
    if requested_ms >= stored_ms:
        return requested_ms
    if explicit:
        raise ClockError(requested_ms / 1000, stored_ms / 1000)
    return stored_ms


@dataclass(frozen=True)
class Backoff:
    """Retry delay: min(cap, base * factor ** (attempts - 1)) seconds.

    With jitter=True the delay is scaled into [d/2, d) by a hash of
    (event_id, generation, attempts), so retries of different events spread out
    while any one run replays exactly.
    """

    base: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    jitter: bool = True

    def __post_init__(self) -> None:
        for name in ("base", "factor", "cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInput(f"backoff.{name}", "must be a finite number")
            try:
                finite = math.isfinite(value) and value <= 1e11
            except OverflowError:
                finite = False
            if not finite:
                raise InvalidInput(f"backoff.{name}", "must be a finite number up to 1e11")
        if self.base < 0:
            raise InvalidInput("backoff.base", "must be >= 0")
        if self.factor < 1:
            raise InvalidInput("backoff.factor", "must be >= 1")
        if self.cap < 0:
            raise InvalidInput("backoff.cap", "must be >= 0")
        if not isinstance(self.jitter, bool):
            raise InvalidInput("backoff.jitter", "must be True or False")

    def delay(self, event_id: str, generation: int, attempts: int) -> float:
        """Seconds to wait before the next claim after the attempts-th failed one."""
        try:
            raw = self.base * self.factor ** max(attempts - 1, 0)
        except OverflowError:
            raw = self.cap
        d = min(self.cap, raw)
        if not self.jitter or d == 0:
            return d
        return d * (0.5 + jitter_draw(event_id, generation, attempts) / 2)


def jitter_draw(event_id: str, generation: int, attempts: int) -> float:
    """The jitter draw u in [0, 1) of a retry: a hash of (event_id,
    generation, attempts), so any one run replays exactly."""
    key = f"{event_id}\x00{generation}\x00{attempts}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64


class Decision(NamedTuple):
    """Where a fenced settle leaves an event: its state, when it is next due,
    why it was quarantined, and the claims its round counts afterwards.
    (A named tuple: one is made per settle, and costs half a frozen dataclass.)"""

    state: State
    next_at_ms: int | None
    quarantine_cause: str | None  # "fail" or "attempts_exhausted" when quarantined
    attempts: int


def decide(
    outcome: Outcome,
    *,
    event_id: str,
    generation: int,
    attempts: int,
    max_attempts: int,
    now_ms: int,
    delay: float | None,
    backoff: Backoff,
) -> Decision:
    """The settle decision: the state after a fenced ack, retry, fail or release.

    attempts counts claims in this round, the one being settled included. An
    ack is final. A release gives the lease back unused: ready at once, and
    the claim no longer counts against the round's budget. A fail
    quarantines. A retry is ready again after `delay` (or the backoff), unless
    the round's budget is spent, which quarantines.
    """
    if outcome is Outcome.ACK:
        return Decision(State.ACKED, None, None, attempts)
    if outcome is Outcome.RELEASE:
        return Decision(State.READY, now_ms, None, attempts - 1)
    if outcome is Outcome.FAIL:
        return Decision(State.QUARANTINED, None, "fail", attempts)
    if attempts >= max_attempts:
        return Decision(State.QUARANTINED, None, "attempts_exhausted", attempts)
    wait = backoff.delay(event_id, generation, attempts) if delay is None else delay
    return Decision(State.READY, now_ms + to_ms(wait), None, attempts)


# -- an event's own policy -------------------------------------------------------
#
# An event may carry its own max_attempts and backoff (a task's, written with
# it at enqueue): every process then judges it by those, whatever its own
# registry or the queue's stored policy says; an event without them is judged
# by the queue's. The same choice is made in SQL on PostgreSQL (coalesce of
# the event's column and the policy row's).


def backoff_text(backoff: Backoff) -> str:
    """A Backoff as the JSON text an event stores (keys in sorted order)."""
    return json.dumps({"base": backoff.base, "cap": backoff.cap, "factor": backoff.factor,
                       "jitter": backoff.jitter}, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=64)
def backoff_from_text(text: str) -> Backoff:
    """The Backoff an event stores as backoff_text wrote it."""
    found = json.loads(text)
    return Backoff(found["base"], found["factor"], found["cap"], found["jitter"])


def own_budget(max_attempts: int | None, backoff: str | None, policy_max_attempts: int,
               policy_backoff: Backoff) -> tuple[int, Backoff]:
    """The retry budget and backoff an event is judged by: its own where it
    stores them (max_attempts; backoff as backoff_text wrote it), else the
    queue's policy's."""
    return (policy_max_attempts if max_attempts is None else max_attempts,
            policy_backoff if backoff is None else backoff_from_text(backoff))



#: The retry policy a new queue file stores when its opener gives none.
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_LEASE_SECONDS = 30.0


@dataclass(frozen=True)
class Policy:
    """A queue's retry policy, stored in its file and shared by every process
    that opens it: max_attempts claims per round before an event is
    quarantined (a holder that died counts), the backoff between retries,
    and lease_seconds, the lease a claim or extend gets when the call names
    none. version counts the changes (1: as the file was created); it takes
    no part in comparisons."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = Backoff()
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    version: int = field(default=1, compare=False)


def policy_json(policy: Policy) -> dict[str, Any]:
    """A Policy as plain JSON values (audit detail, CLI output)."""
    b = policy.backoff
    return {"max_attempts": policy.max_attempts, "lease_seconds": policy.lease_seconds,
            "backoff": {"base": b.base, "factor": b.factor, "cap": b.cap, "jitter": b.jitter},
            "version": policy.version}


#: The stored policy row's columns, in the order policy_from_row reads them.
POLICY_ROW = ("max_attempts", "lease_ms", "backoff_base_s", "backoff_factor", "backoff_cap_s", "backoff_jitter",
              "version")


@functools.lru_cache(maxsize=8)
def policy_from_row(row: tuple[Any, ...]) -> Policy:
    """A Policy from a stored policy row, read in POLICY_ROW's order."""
    max_attempts, lease_ms, base, factor, cap, jitter, version = row
    return Policy(int(max_attempts), Backoff(float(base), float(factor), float(cap), bool(jitter)),
                  int(lease_ms) / 1000, int(version))


def policy_params(policy: Policy) -> dict[str, Any]:
    """The values a store writes into its policy row (all but the version),
    named as its statements bind them."""
    b = policy.backoff
    return {"max_attempts": policy.max_attempts, "lease_ms": to_ms(policy.lease_seconds),
            "base": float(b.base), "factor": float(b.factor), "cap": float(b.cap), "jitter": bool(b.jitter)}
