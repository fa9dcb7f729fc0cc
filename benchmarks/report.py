"""The table benchmarks/run.py prints: every figure, and each target with whether it was met."""

from __future__ import annotations

from typing import Any

import contention
import tenants

SYNCS = ("full", "normal")

TARGETS = [
    ("single-item cycle at NORMAL vs reference", lambda r: r["single_normal"]["ratio"], ">=", 0.6),
    ("single-item cycle at FULL vs reference", lambda r: r["single_full"]["ratio"], ">=", 0.9),
    ("batch cycle (100) at FULL vs reference", lambda r: r["batch_full"]["ratio"], ">=", 0.7),
    ("claim+settle at the largest backlog vs 1k (worst spread)",
     lambda r: max(v["ratio_to_1k"] for k, v in r["latency"].items()
                   if v["events"] == max(x["events"] for x in r["latency"].values())), "<=", 1.3),
    ("claim+settle with blocked flows vs 1k", lambda r: r["latency_blocked"]["ratio_to_1k"], "<=", 1.3),
    ("4-process drain at FULL vs reference", lambda r: r["drain_full"]["ratio"], ">=", 1.0),
    ("4 processes x 4 threads drain at FULL vs reference", lambda r: r["drain_threads"]["ratio"], ">=", 1.0),
    ("fairq serve claim+ack req/s, 8 clients / 1", lambda r: r["contention"]["serve"]["ratio"], ">=", 3.0),
    ("threaded Worker events/s, concurrency 8 / 1 (batch 1)", lambda r: r["contention"]["worker"]["ratio"],
     ">=", 4.0),
    ("worst flow's share / mean, 4 processes, 4 equal flows",
     lambda r: r["contention"]["fairness"]["worst_share_over_mean"], ">=", 0.8),
    ("tenants A/B: B's last job's completion index", lambda r: r["tenants"]["ab"]["tenants"]["b_last_index"],
     "<=", 150),
    ("tenants A/B: drain time with tenants / without", lambda r: r["tenants"]["ab"]["drain_ratio"], "<=", 1.2),
    ("claim+settle, events in 100k tenants vs in 10", lambda r: r["tenants"]["cost"]["each"]["ratio"]
     / r["tenants"]["cost"]["few"]["ratio"], "<=", 1.3),
    ("claim+settle beside 10k capped tenants vs without", lambda r: r["tenants"]["cost"]["capped"]["ratio"]
     / r["tenants"]["cost"]["each"]["ratio"], "<=", 1.3),
    ("4-process drain duplicates+losses+errors", lambda r: sum(
        r[f"drain_{s}"]["fairq"][k] for s in SYNCS for k in ("duplicates", "losses", "errors")), "<=", 0),
]


def table(results: dict[str, Any]) -> str:
    lines = ["| measure | fairq | reference / raw | ratio |", "|---|---:|---:|---:|"]
    for sync in SYNCS:
        raw = results.get(f"raw_{sync}")
        if raw is not None:
            lines.append(f"| raw SQLite single-row commits/s ({sync}) | | "
                         f"{raw['single_row_commits_per_s']:,.0f} | |")
            lines.append(f"| raw SQLite rows/s in 1000-row transactions ({sync}) | | "
                         f"{raw['rows_per_s_in_1000_row_transactions']:,.0f} | |")
        for kind, label in (("single", "single-item cycle items/s"), ("batch", "batch cycle (100) items/s")):
            r = results.get(f"{kind}_{sync}")
            if r is not None:
                lines.append(f"| {label} ({sync}) | {r['fairq_items_per_s']:,.0f} | "
                             f"{r['reference_items_per_s']:,.0f} | {r['ratio']:.2f} |")
        d = results.get(f"drain_{sync}")
        if d is None:
            continue
        lines.append(f"| 4-process drain items/s ({sync}) | {d['fairq']['items_per_s']:,.0f} | "
                     f"{d['reference']['items_per_s']:,.0f} | {d['ratio']:.2f} |")
        lines.append(f"| 4-process drain duplicates/losses/errors ({sync}) | "
                     f"{d['fairq']['duplicates']}/{d['fairq']['losses']}/{d['fairq']['errors']} | "
                     f"{d['reference']['duplicates']}/{d['reference']['losses']}/{d['reference']['errors']} | |")
    t = results.get("drain_threads")
    if t is not None:
        lines.append(f"| 4 processes x 4 threads drain items/s (full) | {t['items_per_s']:,.0f} | "
                     f"{results['drain_full']['reference']['items_per_s']:,.0f} | {t['ratio']:.2f} |")
        lines.append(f"| 4 x 4 drain duplicates/losses/errors (full) | "
                     f"{t['duplicates']}/{t['losses']}/{t['errors']} | | |")
    if "contention" in results:
        lines += contention.table(results["contention"])
    cycles = [(kind, sync) for sync in SYNCS for kind in ("single", "batch") if f"{kind}_{sync}" in results]
    if cycles:
        lines += ["", "| process CPU per item | fairq µs | reference µs | ratio (reference ÷ fairq) |",
                  "|---|---:|---:|---:|"]
    for kind, sync in cycles:
        r = results[f"{kind}_{sync}"]
        label = "single-item cycle" if kind == "single" else "batch cycle (100)"
        lines.append(f"| {label} ({sync}) | {r['fairq_cpu_us_per_item']:.1f} | "
                     f"{r['reference_cpu_us_per_item']:.1f} | {r['cpu_ratio']:.2f} |")
    if "latency" in results or "latency_blocked" in results:
        lines += ["", "| waiting events | flows | claim+settle median µs (normal) | ratio to 1k |",
                  "|---:|---:|---:|---:|"]
    for v in results.get("latency", {}).values():
        lines.append(f"| {v['events']:,} | {v['flows']:,} | {v['median_us']:.0f} | {v['ratio_to_1k']:.2f} |")
    b = results.get("latency_blocked")
    if b is not None:
        lines.append(f"| 1,000 + {b['blocked_flows']:,} blocked ({b['quarantined']:,} quarantined, "
                     f"{b['backing_off']:,} backing off) | 1,000 | {b['median_us']:.0f} | "
                     f"{b['ratio_to_1k']:.2f} |")
    if "tenants" in results:
        lines += ["", *tenants.table(results["tenants"])]
    lines += ["", "| target | measured | met |", "|---|---:|---|"]
    for name, get, op, bound in TARGETS:
        try:
            value = get(results)
        except KeyError:  # a figure this run did not measure (--only)
            continue
        met = value >= bound if op == ">=" else value <= bound
        lines.append(f"| {name} {op} {bound} | {value:.2f} | {'yes' if met else 'no'} |")
    return "\n".join(lines)
