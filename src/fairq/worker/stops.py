"""Pure pieces of a run loop that Worker and fairq.aio.AsyncWorker share: the stop
mode, the until_empty test, a claimer's fair share of the open heads, the tick log lines."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from ..errors import FairqError, InvalidInput
from ..types import State, Stats

log = logging.getLogger("fairq.worker")


def stop_mode(until_idle: bool, until_empty: bool) -> str | None:
    """run()'s stop mode: "until_empty", "until_idle" or None (until a signal or stop())."""
    if until_idle and until_empty:
        raise InvalidInput("until_empty", "choose one stop mode: until_idle or until_empty")
    return "until_empty" if until_empty else "until_idle" if until_idle else None


def only_quarantined_left(stats: Stats) -> bool:
    """until_empty's test: every flow's head is quarantined or the flow is gone."""
    return bool(stats.flows - stats.counts[State.QUARANTINED.value] == 0)


def fair_share(stats: Stats, batch: int, claimers: int) -> int:
    """A claim's size: no more than `batch`, nor than a fair share (among `claimers`) of the open heads."""
    open_heads = stats.flows - stats.counts[State.QUARANTINED.value] - stats.counts[State.INFLIGHT.value]
    return max(1, min(batch, math.ceil(int(open_heads) / claimers)))


def log_tick(made: Sequence[Any]) -> None:
    """Log a tick that turned schedule slots into events (nothing when none)."""
    if made:
        log.info("schedules.tick instances=%d", len(made))


def log_tick_failed(exc: FairqError) -> None:
    """Log a tick that failed (ticking is a side job: the events still get worked)."""
    log.error("schedules.tick_failed error=%r", f"{type(exc).__name__}: {exc}")
