"""Enqueue: idempotent by id, canonical bodies, all-or-nothing batches."""

from __future__ import annotations

import re

import pytest

import fairq


def test_an_identical_repeat_is_not_created_again(q: fairq.Queue) -> None:
    first = q.enqueue("E0001", {"category": "book", "amount_cents": 10000}, flow="shop", now=0)
    again = q.enqueue("E0001", {"amount_cents": 10000, "category": "book"}, flow="shop", now=0)
    assert first == fairq.Enqueued("E0001", "shop", 1, True)
    assert again == fairq.Enqueued("E0001", "shop", 1, False)
    assert q.stats(now=0).counts["ready"] == 1


def test_a_repeat_is_recognised_after_the_event_was_acked(q: fairq.Queue) -> None:
    q.enqueue("x", {"a": 1}, now=0)
    q.ack(q.claim(now=0), now=0)
    assert q.enqueue("x", {"a": 1}, now=1).created is False
    assert q.claim(now=1) is None


@pytest.mark.parametrize("body, flow, field", [
    ({"amount_cents": 9999}, "shop", "body"),
    ({"amount_cents": 10000.0}, "shop", "body"),  # int and float stay distinct
    ({"amount_cents": 10000}, "other", "flow"),
    ({"amount_cents": 10000}, None, "flow"),
])
def test_the_same_id_with_another_body_or_flow_conflicts_and_writes_nothing(q, body, flow, field) -> None:
    q.enqueue("E1", {"amount_cents": 10000}, flow="shop", now=0)
    with pytest.raises(fairq.Conflict) as info:
        q.enqueue("E1", body, flow=flow, now=0)
    assert info.value.event_id == "E1" and info.value.field == field
    assert q.events(limit=10)[0].body == {"amount_cents": 10000}
    assert q.stats(now=0).counts["ready"] == 1


def test_seqs_are_assigned_per_flow_without_gaps(q: fairq.Queue) -> None:
    seqs = [q.enqueue(f"{f}{i}", {}, flow=f, now=0).seq for i in range(3) for f in "AB"]
    assert seqs == [1, 1, 2, 2, 3, 3]


def test_enqueue_many_is_all_or_nothing_on_conflict(q: fairq.Queue) -> None:
    q.enqueue("old", {"v": 1}, now=0)
    with pytest.raises(fairq.Conflict):
        q.enqueue_many([("new1", {}), ("new2", {}), ("old", {"v": 2})], now=0)
    assert [e.event_id for e in q.events()] == ["old"]


def test_enqueue_many_collapses_identical_repeats_and_refuses_conflicting_ones(q: fairq.Queue) -> None:
    got = q.enqueue_many([("a", {"x": 1}, "F"), ("a", {"x": 1}, "F"), ("b", {}, "F")], now=0)
    assert [(e.event_id, e.seq, e.created) for e in got] == [("a", 1, True), ("a", 1, False), ("b", 2, True)]
    with pytest.raises(fairq.Conflict):
        q.enqueue_many([("c", {"x": 1}), ("c", {"x": 2})], now=0)
    assert q.get("c") is None


def test_enqueue_many_accepts_dicts_with_flow_and_delay(q: fairq.Queue) -> None:
    q.enqueue_many([{"event_id": "d1", "body": {}, "flow": "F", "delay": 5},
                    {"event_id": "d2", "body": [1]}], now=0)
    assert q.get("d1").next_at == 5 and q.get("d2").flow is None
    assert [lease.event_id for lease in q.claim_many(5, now=0)] == ["d2"]


def test_enqueue_many_of_nothing_returns_nothing(q: fairq.Queue) -> None:
    assert q.enqueue_many([], now=0) == []


def test_a_delay_makes_the_event_claimable_later(q: fairq.Queue) -> None:
    q.enqueue("x", {}, delay=2.5, now=1)
    assert q.claim(now=3.49) is None
    assert q.claim(now=3.5).event_id == "x"


UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_an_enqueue_without_an_id_gets_a_new_unique_time_ordered_one(q: fairq.Queue) -> None:
    made = [q.enqueue(None, {"same": "body"}, now=0) for _ in range(300)]
    ids = [e.event_id for e in made]
    assert all(UUID7.match(i) for i in ids), ids[:3]
    assert len(set(ids)) == 300 and sorted(ids) == ids
    # Not idempotent: each call added its own event.
    assert all(e.created for e in made)
    assert q.stats(now=0).counts["ready"] == 300
    assert q.get(ids[0]).body == {"same": "body"}


def test_a_conflict_over_a_flow_of_its_own_says_so_in_words(q: fairq.Queue) -> None:
    q.enqueue("a", {}, now=0)
    q.enqueue("b", {}, flow="F", now=0)
    with pytest.raises(fairq.Conflict) as own:
        q.enqueue("a", {}, flow="F", now=0)
    assert str(own.value) == "event 'a' is already stored in a flow of its own, not in flow 'F'"
    with pytest.raises(fairq.Conflict) as named:
        q.enqueue("b", {}, now=0)
    assert str(named.value) == "event 'b' is already stored in flow 'F', not in a flow of its own"
    assert "None" not in str(own.value) + str(named.value)
