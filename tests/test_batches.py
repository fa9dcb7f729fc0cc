"""Batch sizes: in-process batches have no cap; one HTTP call takes at most 10,000 items."""

from __future__ import annotations

import fairq
from helpers import TOKEN, raw, running

OVER = 10_001  # one more than an HTTP call takes


def test_enqueue_many_in_process_takes_more_than_10000_items(q: fairq.Queue) -> None:
    done = q.enqueue_many([(f"e{i}", {"i": i}) for i in range(OVER)], now=0)
    assert len(done) == OVER and all(e.created for e in done)
    assert q.stats(now=0).counts["ready"] == OVER


def test_claim_many_and_settle_many_in_process_take_more_than_10000(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {}) for i in range(OVER)], now=0)
    leases = q.claim_many(OVER, now=0)
    assert len(leases) == OVER
    results = q.settle_many([(lease, "ack") for lease in leases], now=1)
    assert [r.state for r in results] == [fairq.State.ACKED] * OVER


def test_the_http_edge_still_takes_at_most_10000_items_per_call(make_queue, db_path) -> None:
    q = make_queue()
    with running(q) as server:
        items = [{"event_id": f"e{i}", "body": {}} for i in range(OVER)]
        answer = raw(server, "POST", "/v1/enqueue_many", {"items": items}, token=TOKEN)
        assert answer.status == 400 and "at most 10000" in answer.text, answer
        answer = raw(server, "POST", "/v1/claim_many", {"n": OVER}, token=TOKEN)
        assert answer.status == 400 and "10000" in answer.text, answer
        refs = [{"lease": {"event_id": f"e{i}", "generation": 1}, "outcome": "ack"} for i in range(OVER)]
        answer = raw(server, "POST", "/v1/settle_many", {"items": refs}, token=TOKEN)
        assert answer.status == 400 and "at most 10000" in answer.text, answer
    assert q.stats().counts["ready"] == 0
