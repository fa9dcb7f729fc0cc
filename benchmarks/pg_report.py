"""The tables benchmarks/postgres.py prints (markdown rows), from its results dict."""

from __future__ import annotations

import statistics
from typing import Any

from pg_trips import first_words


def _items(batch: int) -> str:
    return "single" if batch == 1 else f"batch {batch}"


def rtt_check(check: dict[str, Any]) -> list[str]:
    lines = ["| path | SELECT 1 median ms | p90 ms |", "|---|---:|---:|"]
    for name, s in check.items():
        lines.append(f"| {name} | {s['median_ms']:.3f} | {s['p90_ms']:.3f} |")
    return lines


def drains(rows: list[dict[str, Any]], repeat: int) -> list[str]:
    lines = [f"claim+ack per second, median of {repeat} run(s) per cell (raw and fairq interleaved)", "",
             "| RTT ms | items | processes | raw /s | fairq /s | fairq ÷ raw | fairq empty claims |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        empty = statistics.median(run["empty_claims"] for run in r["fairq_runs"])
        lines.append(f"| {r['rtt_ms']:g} | {_items(r['batch'])} | {r['processes']} | {r['raw_per_s']:,.0f} | "
                     f"{r['fairq_per_s']:,.0f} | {r['ratio']:.2f} | {empty:,.0f} |")
    return lines


def scaling(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["| RTT ms | items | processes | raw scaling | fairq scaling |", "|---:|---|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['rtt_ms']:g} | {_items(r['batch'])} | {r['high']} ÷ {r['low']} | "
                     f"{r['raw']:.2f} | {r['fairq']:.2f} |")
    return lines


def waits(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| RTT ms | items | queue | claims | backend samples | Lock samples | Lock samples ÷ claim | "
             "≈ lock wait ms ÷ claim | SELECT 1 ms during drain | top wait events (share of backend samples) |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        w = r["waits"]
        top = ", ".join(f"{name} {n / max(1, w['backend_samples']):.0%}" for name, n in w["top"])
        lines.append(f"| {r['rtt_ms']:g} | {_items(r['batch'])} | {r['kind']} | {w['claims']:,} | "
                     f"{w['backend_samples']:,} | {w['lock_samples']:,} | {w['lock_samples_per_claim']:.3f} | "
                     f"{w['lock_wait_ms_per_claim']:.3f} | {w['probe_ms_median']:.2f} | {top} |")
    return lines


def trips(verbs: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| verb | round trips | statements | range | statements sent |", "|---|---:|---:|---:|---|"]
    for verb, v in verbs.items():
        spread = f"{v['min']}–{v['max']}" if v["min"] != v["max"] else f"{v['min']}"
        lines.append(f"| {verb} | {v['round_trips']:g} | {v['statements']:g} | {spread} | "
                     f"{first_words(v['sql'])} |")
    return lines


def claim_cost(rows: dict[str, dict[str, Any]], claims: int) -> list[str]:
    lines = [f"one claim (claim, then ack; {claims} rounds), ms", "",
             "| backlog | SQLite median / p99 | PostgreSQL median / p99 |", "|---|---:|---:|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['sqlite'][0]:.2f} / {row['sqlite'][1]:.2f} | "
                     f"{row['postgres'][0]:.2f} / {row['postgres'][1]:.2f} |")
    return lines


def worker(rows: dict[int, dict[str, float]]) -> list[str]:
    lines = ["fairq.Worker (no-op handler, one thread per process), claim+ack per second", "",
             "| processes | SQLite /s | PostgreSQL /s |", "|---:|---:|---:|"]
    for n, row in rows.items():
        lines.append(f"| {n} | {row['sqlite']:,.0f} | {row['postgres']:,.0f} |")
    return lines
