"""`fairq metrics`: the Prometheus text exposition format, checked line by line."""

from __future__ import annotations

import math

import fairq
from fairq.metrics import exposition
from helpers import cli, parse


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
    done = cli("--db", "q.db", "metrics", "--top", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _, samples = parse(done.stdout)
    assert sum(1 for name, _, _ in samples if name == "fairq_flow_backlog") == 1
    assert ("fairq_events", {"state": "inflight"}, 0.0) in samples
