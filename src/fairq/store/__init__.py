"""The store layer: every SQL statement fairq runs lives in this package.

Above it (fairq.queue, fairq.schedules) nothing knows which database it talks
to: the facade speaks the protocols of fairq.backend, and open_store is the
one place that picks the store for a Queue's `path` argument. A store for
another database implements the same protocols and asks fairq.rules and
fairq.policy for every decision (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

from ..backend import Store
from ..policy import Policy
from .queue import QueueStore


def open_store(path: Any, *, synchronous: str, busy_timeout: float, readonly: bool = False,
               policy: Policy | None = None) -> Store:
    """Open (creating and migrating it if needed) the queue store at `path`.

    Every path is an SQLite file today; a URL scheme for another database
    would be routed here.
    """
    return QueueStore(path, synchronous=synchronous, busy_timeout=busy_timeout, readonly=readonly, policy=policy)
