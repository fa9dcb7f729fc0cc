"""A queue's Stats and tenants in the Prometheus text exposition format (version 0.0.4).

Formatting, and the paging that reads every tenant through a reader's
`tenants` (every_tenant); no SQL. Names and meanings are listed in
docs/operations.md; counters come from Stats.totals and only grow, gauges are
the current counts. The claim-lag histogram has buckets and a count but no
_sum: the queue keeps bucket counts only. Per-tenant gauges are bounded: the
TOP_TENANTS tenants with the most ready events get a series each, the rest
are summed into one series labelled tenant="other".
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator
from typing import Any

from .types import Stats, TenantInfo

__all__ = ["CONTENT_TYPE", "OTHER", "TENANT_PAGE", "TOP_TENANTS", "every_tenant", "exposition", "top_tenants"]

#: The HTTP Content-Type of the text this module writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Tenants with a series of their own: those with the most ready events.
TOP_TENANTS = 20
#: The label of the one series that sums every other tenant (a tenant of this name is summed there too).
OTHER = "other"
#: Tenants read a page at a time for one exposition (each page its own snapshot).
TENANT_PAGE = 1000

_TOTAL_HELP = {
    "enqueued": "Events stored by enqueue since the file was created.",
    "claimed": "Claims (attempts) since the file was created.",
    "expired": "Leases a claim found ended without a settle (taken over, or quarantined when the budget was spent).",
    "acked": "Events settled as ack.",
    "retried": "Settles that sent an event back to ready for another attempt.",
    "quarantined": "Events quarantined (by fail, or with their retry budget spent).",
    "redriven": "Quarantined events given a new round by redrive.",
    "discarded": "Events an operator discarded (their flow went on after them).",
    "purged": "Acked or discarded events removed by purge (a tombstone keeps their id).",
}


def every_tenant(reader: Any) -> Iterator[TenantInfo]:
    """Every tenant of a Queue or Client (`reader.tenants`), by name, a page
    of TENANT_PAGE at a time: memory stays bounded by one page whatever the
    number of tenants, and each page is its own snapshot."""
    after: str | None = None
    while True:
        page = reader.tenants(after=after, limit=TENANT_PAGE)
        yield from page
        if len(page) < TENANT_PAGE:
            return
        after = page[-1].name


def exposition(stats: Stats, tenants: Iterable[TenantInfo] = ()) -> str:
    """Every metric of `stats`, and per-tenant gauges of `tenants` (see
    top_tenants), as Prometheus text, one sample per line, ending with a newline."""
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        lines.append(f"# HELP {name} {_escape_help(help_text)}")
        lines.append(f"# TYPE {name} {kind}")

    def sample(name: str, value: float, **labels: str) -> None:
        text = ",".join(f'{key}="{_escape_label(val)}"' for key, val in labels.items())
        lines.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")

    family("fairq_events", "gauge", "Events stored in each state.")
    for state, n in stats.counts.items():
        sample("fairq_events", n, state=state)
    family("fairq_claimable_now", "gauge",
           "Heads a claim could take now: due, in a flow not paused, of a tenant no limit holds back.")
    sample("fairq_claimable_now", stats.claimable_now)
    family("fairq_blocked_flows", "gauge", "Flows whose head is quarantined, or that are paused, with an event waiting.")
    sample("fairq_blocked_flows", stats.blocked_flows)
    family("fairq_flows", "gauge", "Flows with an event not yet acked or discarded (a quarantined head blocks its flow).")
    sample("fairq_flows", stats.flows)
    family("fairq_oldest_ready_age_seconds", "gauge",
           "How long the longest-waiting claimable head has been claimable.")
    sample("fairq_oldest_ready_age_seconds", stats.oldest_ready_age)
    family("fairq_tombstones", "gauge", "Purged event ids still remembered for deduplication.")
    sample("fairq_tombstones", stats.tombstones)
    family("fairq_flow_backlog", "gauge", "Unacked events of the named flows with the largest backlog.")
    for flow, n in stats.top_flows:
        sample("fairq_flow_backlog", n, flow=flow)
    for total, n in stats.totals.items():
        name = f"fairq_{total}_total"
        family(name, "counter", _TOTAL_HELP.get(total, f"{total} since the file was created."))
        sample(name, n)
    family("fairq_claim_lag_seconds", "histogram",
           "Seconds from an event's due time to its first claim (no _sum: buckets only).")
    cumulative = 0
    for bound, n in stats.claim_lag_buckets:
        cumulative += n
        sample("fairq_claim_lag_seconds_bucket", cumulative, le=_number(bound))
    sample("fairq_claim_lag_seconds_count", cumulative)
    all_held = [0]

    def counting() -> Iterator[TenantInfo]:
        for t in tenants:
            all_held[0] += t.limited_by is not None
            yield t

    top, other = top_tenants(counting())
    held = {t.name: int(t.limited_by is not None) for t in top}
    series = [(t.name, t.inflight, t.ready, held[t.name]) for t in top]
    if other is not None:
        series.append((OTHER, other.inflight, other.ready, all_held[0] - sum(held.values())))
    for name, column, help_text in (
        ("fairq_tenant_inflight", 1, "Events of the tenant leased now."),
        ("fairq_tenant_ready", 2, "Events of the tenant in state ready (due or not)."),
        ("fairq_tenant_held", 3, "1 when a limit of the tenant (max_inflight or rate) holds it back now "
                                 f'(for tenant="{OTHER}": how many of the others).'),
    ):
        family(name, "gauge", f"{help_text} The {TOP_TENANTS} tenants with the most ready events; "
                              f'tenant="{OTHER}" sums the rest.')
        for tenant, *figures in series:
            sample(name, figures[column - 1], tenant=tenant)
    return "\n".join(lines) + "\n"


def top_tenants(tenants: Iterable[TenantInfo], n: int = TOP_TENANTS) -> tuple[list[TenantInfo], TenantInfo | None]:
    """The n tenants with the most ready events (ties by name), and the rest
    summed as one TenantInfo named OTHER (None when there is no rest), in one
    pass that keeps only the n. A tenant named OTHER is always summed with
    the rest, so no two series share a label."""
    sums = [0, 0, 0, 0]  # tenants, inflight, ready, flows

    def ranked() -> Iterator[TenantInfo]:
        for t in tenants:
            sums[0] += 1
            sums[1] += t.inflight
            sums[2] += t.ready
            sums[3] += t.flows
            if t.name != OTHER:
                yield t

    top = heapq.nsmallest(n, ranked(), key=lambda t: (-t.ready, t.name))
    if sums[0] == len(top):
        return top, None
    return top, TenantInfo(OTHER, weight=0, max_inflight=0, rate=0, burst=0,
                           inflight=sums[1] - sum(t.inflight for t in top),
                           ready=sums[2] - sum(t.ready for t in top), flows=sums[3] - sum(t.flows for t in top))


def _number(x: float) -> str:
    if isinstance(x, int):
        return str(x)
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if math.isnan(x):
        return "NaN"
    return repr(float(x))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")
