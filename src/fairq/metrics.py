"""A queue's Stats in the Prometheus text exposition format (version 0.0.4).

Pure formatting: no I/O, no SQL. Names and meanings are listed in
docs/operations.md; counters come from Stats.totals and only grow, gauges are
the current counts. The claim-lag histogram has buckets and a count but no
_sum: the queue keeps bucket counts only.
"""

from __future__ import annotations

import math

from .types import Stats

__all__ = ["CONTENT_TYPE", "exposition"]

#: The HTTP Content-Type of the text this module writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

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


def exposition(stats: Stats) -> str:
    """Every metric of `stats` as Prometheus text, one sample per line, ending with a newline."""
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
    family("fairq_flows", "gauge", "Flows with an unacked event (a quarantined head blocks its flow).")
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
    return "\n".join(lines) + "\n"


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
