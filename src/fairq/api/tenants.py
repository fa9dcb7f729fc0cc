"""The Queue's tenant verbs: set a tenant's weight and limits, list tenants.

QueueTenants is a base class of fairq.Queue (on QueueBase, fairq.api.base).
A tenant groups flows (a customer's) into one turn of the rotation, whatever
its number of flows; its weight, its cap on events leased at once
(max_inflight) and its token bucket (rate, burst) are stored with it, so
every process claims by the same limits. The rules are fairq.kernel.tenants'.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import _validate as v
from ..kernel.policy import MAX_WEIGHT
from ..limits import MAX_FLOWS_LISTED
from ..types import TenantInfo
from .base import QueueBase

__all__ = ["QueueTenants"]

log = logging.getLogger("fairq")

#: The highest max_inflight, rate and burst a tenant can be given.
MAX_LIMIT = 1_000_000


class QueueTenants(QueueBase):
    """The tenant verbs of fairq.Queue: set_tenant, tenants."""

    def set_tenant(
        self, tenant: str, *, weight: int | None = None, max_inflight: int | None = None,
        rate: int | None = None, burst: int | None = None, reason: str | None = None, actor: str | None = None,
        now: float | None = None,
    ) -> TenantInfo:
        """Store a tenant's settings (creating the tenant if it is new) with an
        audit row ("set_tenant", the settings before and after); returns the
        tenant as stored.

        weight: claims per round of the tenant rotation (1..1000, default 1).
        max_inflight: at most so many of its events leased at once, across
        every process (0: no limit). rate, burst: a token bucket on the
        queue's clock -- at most `burst` claims at once and `rate` per second
        on average (rate 0: no limit; a rate without a burst gets
        burst = rate). None leaves a setting as it is. A tenant held back by
        a limit is skipped without losing its place.
        """
        tenant = v.identifier(tenant, "tenant")
        weight = None if weight is None else v.count(weight, "weight", low=1, high=MAX_WEIGHT)
        max_inflight = _limit(max_inflight, "max_inflight")
        rate = _limit(rate, "rate")
        burst = _limit(burst, "burst")
        reason = v.reason(reason, "reason", required=False)
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        with self._store.transaction("set_tenant") as tx:
            info = tx.set_tenant(tenant, weight=weight, max_inflight=max_inflight, rate=rate, burst=burst,
                                 reason=reason, actor=actor, now_ms=tx.now(*requested))
        log.info("set_tenant %s: weight %d, max_inflight %d, rate %d, burst %d, by %s: %s", info.name,
                 info.weight, info.max_inflight, info.rate, info.burst, actor, reason)
        return info

    def tenants(self, *, after: str | None = None, limit: int = 100, now: float | None = None) -> list[TenantInfo]:
        """Tenants by name, each with its settings, its events leased and
        ready, its flows, its tokens and the limit that holds it back now, all
        from one snapshot. after: the name of the last tenant of the previous
        page. A read: never moves the clock. A flow without a tenant is its
        own tenant and is not listed here (Queue.flows lists it)."""
        after = v.optional_identifier(after, "after")
        limit = v.count(limit, "limit", low=1, high=MAX_FLOWS_LISTED)
        now_ms = self._requested(now)[0]
        return self._store.read(lambda tx: tx.tenants(after=after, limit=limit, now_ms=now_ms))


def _limit(value: Any, field: str) -> int | None:
    """A limit setting: None (keep), or an int in 0..MAX_LIMIT (0: no limit)."""
    return None if value is None else v.count(value, field, low=0, high=MAX_LIMIT)
