"""claimable_now and blocked_flows wherever counts are read: GET /v1/stats, GET /metrics
and `fairq metrics` (a SQLite file; the stores' own promise tests cover the counting)."""

from __future__ import annotations

from pathlib import Path

import fairq
from fairq.metrics import exposition

from helpers import HANG, TOKEN, cli, parse, raw, running


def blocked_queue(path: Path) -> fairq.Queue:
    """Flow A: quarantined head and one ready event behind it; flow P: paused; flow B: one due head."""
    q = fairq.Queue(path, max_attempts=1)
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("b1", {}, "B"), ("p1", {}, "P"), ("p2", {}, "P")])
    lease = q.claim(owner="w")
    assert lease is not None and lease.event_id == "a1"
    q.fail(lease, "poison")
    q.pause("P", reason="vendor down")
    return q


def test_stats_over_http_and_the_metrics_carry_claimable_now_and_blocked_flows(tmp_path) -> None:
    with blocked_queue(tmp_path / "q.db") as q, running(q) as server:
        stats = fairq.Client(server.url, token=TOKEN, timeout=HANG).stats()
        assert (stats.claimable_now, stats.blocked_flows, stats.counts["ready"]) == (1, 2, 4)
        answer = raw(server, "GET", "/v1/stats")
        assert (answer.json["claimable_now"], answer.json["blocked_flows"]) == (1, 2)
        types, samples = parse(raw(server, "GET", "/metrics").text)
    assert types["fairq_claimable_now"] == types["fairq_blocked_flows"] == "gauge"
    value = {name: v for name, labels, v in samples if not labels}
    assert (value["fairq_claimable_now"], value["fairq_blocked_flows"]) == (1, 2)


def test_fairq_metrics_prints_the_two_gauges(tmp_path) -> None:
    blocked_queue(tmp_path / "q.db").close()
    done = cli("--db", "q.db", "metrics", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\nfairq_claimable_now 1\n" in done.stdout and "\nfairq_blocked_flows 2\n" in done.stdout
    with fairq.Queue(tmp_path / "q.db") as q:
        assert exposition(q.stats()).count("# TYPE fairq_blocked_flows gauge") == 1
