"""Results: an ack's result is stored in the ack's transaction, read by result(),
waited for by wait(), and removed by purge with its event."""

from __future__ import annotations

import threading
import time

import pytest

import fairq


def test_an_ack_stores_its_result_and_result_returns_it(q: fairq.Queue) -> None:
    q.enqueue("a", {"n": 1}, now=0)
    q.enqueue("b", {"n": 2}, now=0)
    a, b = q.claim_many(2, now=0)
    q.ack(a, result={"total": 3, "items": [1, 2.5, "x", None, True]}, now=1)
    q.ack(b, now=1)
    assert q.result("a") == {"total": 3, "items": [1, 2.5, "x", None, True]}
    assert q.result("b") is None  # acked without a result


def test_result_of_an_event_that_is_not_acked_names_its_state(q: fairq.Queue) -> None:
    for event_id in ("ready", "inflight", "quarantined", "discarded"):
        q.enqueue(event_id, {}, now=0)
    q.discard("discarded", expected_generation=0, reason="not wanted", now=0)
    leases = {lease.event_id: lease for lease in q.claim_many(3, now=0)}
    q.fail(leases["quarantined"], "bad input", now=1)
    q.release(leases["ready"], now=1)
    for event_id, reason in (("ready", None), ("inflight", None), ("quarantined", "bad input"),
                             ("discarded", "not wanted")):
        with pytest.raises(fairq.ResultNotReady) as caught:
            q.result(event_id)
        assert caught.value.event_id == event_id
        assert caught.value.state is fairq.State(event_id)
        assert event_id in str(caught.value)
        if reason is not None:
            assert caught.value.reason == reason
    with pytest.raises(fairq.ResultNotReady) as caught:
        q.result("never")
    assert caught.value.state is None and "no event 'never'" in str(caught.value)
    assert isinstance(caught.value, fairq.FairqError)


def test_a_refused_ack_stores_no_result(q: fairq.Queue, store, target) -> None:
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)
    q.ack(lease, now=1)
    before = store.snapshot(target)
    with pytest.raises(fairq.StaleLease):
        q.ack(lease, result={"late": True}, now=2)
    assert store.snapshot(target) == before
    assert q.result("a") is None


def test_an_expired_lease_stores_no_result(q: fairq.Queue) -> None:
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0, lease_seconds=5)
    with pytest.raises(fairq.LeaseExpired):
        q.ack(lease, result=1, now=6)
    with pytest.raises(fairq.ResultNotReady) as caught:
        q.result("a")
    assert caught.value.state is fairq.State.INFLIGHT


@pytest.mark.parametrize("bad, problem", [
    ({1, 2}, "result"), (float("nan"), "result"), ({"k": b"bytes"}, "result.k"), ("x" * 300, "result"),
])
def test_a_result_that_is_not_json_or_too_big_is_refused_and_nothing_is_written(
        make_queue, store, target, bad, problem) -> None:
    q = make_queue(max_body_bytes=256)
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)
    before = store.snapshot(target)
    with pytest.raises(fairq.InvalidInput) as caught:
        q.ack(lease, result=bad, now=1)
    assert caught.value.field == problem
    assert store.snapshot(target) == before
    with pytest.raises(fairq.InvalidInput) as caught:
        q.settle_many([(lease, "ack", None, None, bad)], now=1)
    assert caught.value.field.endswith(problem)
    assert store.snapshot(target) == before
    assert q.get("a").state is fairq.State.INFLIGHT


def test_only_an_ack_takes_a_result(q: fairq.Queue) -> None:
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)
    with pytest.raises(fairq.InvalidInput) as caught:
        q.settle(lease, "retry", result=1, now=1)
    assert caught.value.field == "result"
    with pytest.raises(fairq.InvalidInput):
        q.settle_many([(lease, "fail", "no", None, 1)], now=1)
    assert q.get("a").state is fairq.State.INFLIGHT


def test_settle_many_stores_each_acked_result_and_none_for_a_lost_lease(q: fairq.Queue) -> None:
    for event_id in ("a", "b", "c"):
        q.enqueue(event_id, {}, now=0)
    a, b, c = q.claim_many(3, now=0)
    q.ack(c, now=1)
    done = q.settle_many([(a, "ack", None, None, "A"), (b, "retry", "later"), (c, "ack", None, None, "C")], now=2)
    assert done[0].state is fairq.State.ACKED and isinstance(done[2], fairq.StaleLease)
    assert q.result("a") == "A"
    assert q.result("c") is None  # its first ack stored none; the lost second one stored nothing
    with pytest.raises(fairq.ResultNotReady):
        q.result("b")


def test_an_ack_with_a_result_and_an_effect_commit_together(q: fairq.Queue, store, target) -> None:
    store.sql(target, "CREATE TABLE effects (event_id TEXT PRIMARY KEY)")
    q.enqueue("a", {}, now=0)
    lease = q.claim(now=0)

    def effect(conn) -> None:
        conn.execute(f"INSERT INTO effects VALUES ({store.param('id')})", {"id": lease.event_id})
        raise RuntimeError("effect failed")

    with pytest.raises(RuntimeError):
        q.ack(lease, result=[1], effect=effect, now=1)
    assert q.get("a").state is fairq.State.INFLIGHT
    assert store.sql(target, "SELECT event_id FROM effects") == []
    q.ack(lease, result=[2], now=1)
    assert q.result("a") == [2]


def test_wait_returns_the_result_once_another_connection_acks(q: fairq.Queue, make_queue) -> None:
    q.enqueue("a", {}, now=0)
    other = make_queue()
    lease = other.claim(now=0, lease_seconds=600)

    def ack_soon() -> None:
        time.sleep(0.05)
        other.ack(lease, result={"done": True}, now=1)

    acker = threading.Thread(target=ack_soon)
    acker.start()
    started = time.monotonic()
    assert q.wait("a", timeout=10) == {"done": True}
    assert time.monotonic() - started < 5
    acker.join()
    assert q.wait("a", timeout=0) == {"done": True}  # an acked event answers at once


def test_wait_hears_a_plain_ack_a_quarantine_and_a_discard(q: fairq.Queue, make_queue) -> None:
    for event_id in ("plain", "failed"):
        q.enqueue(event_id, {}, now=0)
    q.enqueue("dropped", {}, delay=100, now=0)
    other = make_queue()
    leases = {lease.event_id: lease for lease in other.claim_many(2, now=0, lease_seconds=600)}

    def later() -> None:
        time.sleep(0.05)
        other.ack(leases["plain"], now=1)
        other.fail(leases["failed"], "bad sku", now=1)
        other.discard("dropped", expected_generation=0, reason="cancelled", now=1)

    thread = threading.Thread(target=later)
    thread.start()
    assert q.wait("plain", timeout=10) is None
    with pytest.raises(fairq.ResultNotReady) as caught:
        q.wait("failed", timeout=10)
    assert caught.value.state is fairq.State.QUARANTINED and caught.value.reason == "bad sku"
    with pytest.raises(fairq.ResultNotReady) as caught:
        q.wait("dropped", timeout=10)
    assert caught.value.state is fairq.State.DISCARDED and caught.value.reason == "cancelled"
    thread.join()


def test_wait_times_out_with_timeout_error_and_refuses_an_unknown_event(q: fairq.Queue) -> None:
    q.enqueue("a", {}, now=0)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        q.wait("a", timeout=0.1)
    assert 0.1 <= time.monotonic() - started < 3
    with pytest.raises(fairq.ResultNotReady) as caught:
        q.wait("nope", timeout=5)
    assert caught.value.state is None
    with pytest.raises(fairq.InvalidInput) as refused:
        q.wait("a", timeout=-1)
    assert refused.value.field == "timeout"


def test_purge_removes_results_with_their_events(q: fairq.Queue, store, target) -> None:
    q.enqueue("a", {}, now=0)
    q.enqueue("b", {}, now=0)
    a, b = q.claim_many(2, now=0, lease_seconds=600)
    q.ack(a, result="old", now=1)
    q.ack(b, result="new", now=50)
    assert q.purge(acked_before=10, dedup_window=None, now=60).events == 1
    with pytest.raises(fairq.ResultNotReady) as caught:
        q.result("a")
    assert caught.value.state is None
    assert q.result("b") == "new"
    assert len(store.sql(target, "SELECT event_pk FROM event_result")) == 1
