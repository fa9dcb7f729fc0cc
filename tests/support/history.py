"""The claim history that worker processes write (pg_handlers.history), and its checks.

Each line is one handler start: monotonic nanoseconds (one clock for every
process of the machine), flow, seq, event_id, attempts. Sorted by time, the
lines are the claims in the order they were made, give or take the claims in
flight at that moment (a claim is noted just after its transaction commits).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import NamedTuple


class Claim(NamedTuple):
    ns: int
    flow: str
    seq: int
    event_id: str
    attempts: int


def read(folder: Path) -> list[Claim]:
    """Every claim noted in `folder`, in time order (a line cut short by a kill is left out)."""
    claims = []
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 5:
                claims.append(Claim(int(parts[0]), parts[1], int(parts[2]), parts[3], int(parts[4])))
    return sorted(claims)


def order_problems(claims: list[Claim]) -> list[str]:
    """Per flow, the claims must take seqs 1, 2, 3, ... in order: each claim the same seq as the
    flow's last one (claimed again after its holder died or it was retried) or the next one."""
    last: dict[str, int] = {}
    problems = []
    for c in claims:
        before = last.get(c.flow, 0)
        if c.seq not in (before, before + 1) or (c.seq == before == 0):
            problems.append(f"flow {c.flow}: seq {c.seq} claimed after seq {before}")
        last[c.flow] = max(before, c.seq)
    return problems


def worst_spread(claims: list[Claim], weights: dict[str, int], *, backlog: dict[str, int]) -> tuple[float, float]:
    """(worst spread, worst excess) over every prefix of the claims while every flow still has
    unclaimed work: spread = claims_f/w_f - claims_g/w_g for two flows f, g, and excess the spread
    beyond fairq's serial bound max(1/w_f, 1/w_g)."""
    counts: dict[str, int] = defaultdict(int)
    firsts = [c for c in claims if c.attempts == 1]  # a claim again after a kill takes no new turn
    spread = excess = 0.0
    for c in firsts:
        counts[c.flow] += 1
        if counts[c.flow] >= backlog[c.flow]:
            break  # this flow ran out: from here on it no longer competes
        norm = {f: counts[f] / w for f, w in weights.items()}
        spread = max(spread, max(norm.values()) - min(norm.values()))
        for f, nf in norm.items():
            for g, ng in norm.items():
                excess = max(excess, nf - ng - max(1 / weights[f], 1 / weights[g]))
    return spread, excess


def per_flow(claims: list[Claim]) -> dict[str, int]:
    found: dict[str, int] = defaultdict(int)
    for c in claims:
        found[c.flow] += 1
    return dict(found)
