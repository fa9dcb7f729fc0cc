"""`fairq metrics`: the Prometheus text exposition format, checked line by line."""

from __future__ import annotations

import math
import re

import fairq
from fairq.metrics import exposition
from test_cli import fairq_cli

SAMPLE = re.compile(
    r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)\})?'
    r' (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|Inf|NaN))')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str], float]]]:
    """(family -> type, samples) of an exposition; asserts every line is well formed."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    helps: set[str] = set()
    samples = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in helps, f"second HELP for {name}"
            helps.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            assert name not in types, f"second TYPE for {name}"
            types[name] = kind
        else:
            found = SAMPLE.fullmatch(line)
            assert found, f"not a sample line: {line!r}"
            labels = dict(LABEL.findall(found["labels"] or ""))
            samples.append((found["name"], labels, float(found["value"])))
    for name, _, _ in samples:
        family = re.sub(r"_(bucket|count|sum)$", "", name) if name not in types else name
        assert family in types and family in helps, f"{name} has no TYPE/HELP before it"
    return types, samples


def scenario(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("w1", {}, 'we"ird\\flow'),
                    ("u", {})], now=0)
    q.ack(q.claim(now=0.002), now=0.002)
    q.retry(q.claim(now=3), "later", now=3)
    q.fail(q.claim(now=3), "bad", now=3)


def test_the_exposition_is_well_formed_and_typed(q: fairq.Queue) -> None:
    scenario(q)
    types, samples = parse(exposition(q.stats(now=4)))
    for name, kind in types.items():
        assert name.startswith("fairq_")
        assert (kind == "counter") == name.endswith("_total"), name
    assert types["fairq_claim_lag_seconds"] == "histogram"
    assert types["fairq_events"] == "gauge"


def test_the_values_follow_the_queue(q: fairq.Queue) -> None:
    scenario(q)
    _, samples = parse(exposition(q.stats(now=4)))
    value = {(name, tuple(sorted(labels.items()))): v for name, labels, v in samples}
    assert value[("fairq_events", (("state", "acked"),))] == 1
    assert value[("fairq_events", (("state", "quarantined"),))] == 1
    assert value[("fairq_events", (("state", "ready"),))] == 2
    assert value[("fairq_claimed_total", ())] == 3
    assert value[("fairq_enqueued_total", ())] == 4
    assert value[("fairq_quarantined_total", ())] == 1
    assert value[("fairq_purged_total", ())] == 0
    assert value[("fairq_flows", ())] == 3
    # Label values are escaped and come back intact.
    assert value[("fairq_flow_backlog", (("flow", 'we\\"ird\\\\flow'),))] == 1


def test_the_claim_lag_histogram_is_cumulative_and_ends_at_its_count(q: fairq.Queue) -> None:
    scenario(q)
    _, samples = parse(exposition(q.stats(now=4)))
    buckets = [(labels["le"], v) for name, labels, v in samples if name == "fairq_claim_lag_seconds_bucket"]
    count = next(v for name, _, v in samples if name == "fairq_claim_lag_seconds_count")
    bounds = [float(le) for le, _ in buckets]
    assert bounds == sorted(bounds) and math.isinf(bounds[-1]) and buckets[-1][0] == "+Inf"
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and counts[-1] == count == 3
    assert dict(buckets)["0.005"] == 1  # a1 was claimed 2 ms after it was due


def test_fairq_metrics_prints_the_exposition(tmp_path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        scenario(q)
    done = fairq_cli("--db", "q.db", "metrics", "--top", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _, samples = parse(done.stdout)
    assert sum(1 for name, _, _ in samples if name == "fairq_flow_backlog") == 1
    assert ("fairq_events", {"state": "inflight"}, 0.0) in samples
