"""The fair relay, end to end: queue.db -> claim -> receiver.db (Inbox) -> settle."""

from __future__ import annotations

import pytest

import fairq
from helpers import Receiver, step


@pytest.fixture
def receiver(tmp_path):
    r = Receiver(tmp_path / "receiver.db", max_delta=5)
    yield r
    r.close()


def test_the_lease_timeline_gives_two_sends_and_one_effect(q: fairq.Queue, receiver: Receiver) -> None:
    q.enqueue("A1", {"delta": 3}, flow="A", now=0)
    old = q.claim(owner="old", now=0)
    new = q.claim(owner="new", now=5)
    assert (old.generation, new.generation) == (1, 2)
    # The old holder wakes up: the receiver applies its send (it cannot know)...
    assert receiver.send(old) == "accepted"
    # ...but its settle is fenced off.
    with pytest.raises(fairq.StaleLease):
        q.ack(old, now=6)
    # The new holder re-sends the same event: a duplicate, and its ack counts.
    assert receiver.send(new) == "duplicate"
    assert q.ack(new, now=6).state is fairq.State.ACKED
    assert receiver.sends == 2
    assert receiver.receipts() == 1
    assert receiver.projection() == {"A": (3, 1)}


def test_redrive_after_fixing_the_receiver_completes_the_flow_in_order(q, receiver) -> None:
    q.enqueue("A1", {"delta": 10}, flow="A", now=0)
    q.enqueue("A2", {"delta": 1}, flow="A", now=0)
    q.enqueue("B1", {"delta": 2}, flow="B", now=0)
    assert step(q, receiver, now=0) == ("A1", "unsupported_delta")
    assert step(q, receiver, now=0) == ("B1", "accepted")
    assert step(q, receiver, now=0) is None  # A2 waits behind quarantined A1
    a1 = q.get("A1")
    assert a1.state is fairq.State.QUARANTINED

    receiver.max_delta = 1000
    generation = q.redrive("A1", expected_generation=a1.generation,
                           reason="receiver limit raised to 1000", actor="ops", now=1)
    assert generation == a1.generation + 1
    assert step(q, receiver, now=1) == ("A1", "accepted")
    assert step(q, receiver, now=1) == ("A2", "accepted")
    assert receiver.projection() == {"A": (11, 2), "B": (2, 1)}
    assert q.get("A1").lifetime_attempts == 2
    redrives = [a for a in q.audit("A1") if a.action == "redrive"]
    assert len(redrives) == 1
    assert redrives[0].reason == "receiver limit raised to 1000" and redrives[0].actor == "ops"
    assert redrives[0].detail["replaced_reason"] == "unsupported_delta"


def test_a_sequence_conflict_quarantines_only_its_flow(q, receiver) -> None:
    # Someone else already delivered seq 1 of flow A under another id.
    receiver.inbox.receive("other", "A", 1, {"delta": 1})
    q.enqueue("A1", {"delta": 2}, flow="A", now=0)
    q.enqueue("B1", {"delta": 2}, flow="B", now=0)
    assert step(q, receiver, now=0) == ("A1", "sequence_conflict")
    assert step(q, receiver, now=0) == ("B1", "accepted")
    assert q.get("A1").state is fairq.State.QUARANTINED
