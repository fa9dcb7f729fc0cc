"""A queue's Stats from what a store keeps, the same on every store.

A store reads its kept counts with its own SQL (SQLite: the state row and
the retention row; PostgreSQL: the sums of its counter shards) and the few
head reads stats needs, and hands the numbers to `assemble`: the counts by
state, the totals, the claim-lag histogram and its quantiles, the oldest
claimable head's age. Nothing here runs SQL or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..types import TOTALS, State, Stats
from . import policy

__all__ = ["assemble"]

#: The histogram's bucket bounds in seconds, the last one unbounded.
_BOUNDS_S = tuple([b / 1000 for b in policy.CLAIM_LAG_BOUNDS_MS] + [math.inf])


def assemble(*, now_ms: int, counts: Mapping[str, int], totals: Mapping[str, int], purged: int,
             lags: Sequence[int], flows: int, oldest_ready_ms: int | None,
             top_flows: Iterable[tuple[str, int]], tombstones: int, claimable_now: int,
             blocked_flows: int) -> Stats:
    """The Stats of a queue at now_ms. counts: events by state (a missing
    state is 0); totals: the TOTALS counters (a missing one is 0); purged:
    acked events purge removed; lags: the claim-lag bucket counts, one per
    bucket of CLAIM_LAG_BOUNDS_MS and one past it; flows: flows with an
    unacked event; oldest_ready_ms: the earliest claimable time of a ready
    head (None: none); top_flows: (flow, backlog), largest first;
    claimable_now: heads a claim could take at now_ms; blocked_flows: flows
    whose head is quarantined or that are paused with a head."""
    kept = list(lags)
    return Stats(
        counts={s.value: int(counts.get(s.value, 0)) for s in State}, flows=flows,
        oldest_ready_age=0.0 if oldest_ready_ms is None else max(0, now_ms - int(oldest_ready_ms)) / 1000,
        now=now_ms / 1000, totals={**{name: int(totals.get(name, 0)) for name in TOTALS}, "purged": int(purged)},
        claim_lag_median=policy.lag_quantile(kept, 0.5),
        claim_lag_p99=policy.lag_quantile(kept, 0.99),
        claim_lag_buckets=tuple(zip(_BOUNDS_S, kept)),
        top_flows=tuple((name, int(n)) for name, n in top_flows),
        tombstones=int(tombstones), claimable_now=int(claimable_now), blocked_flows=int(blocked_flows),
    )
