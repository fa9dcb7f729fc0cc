"""The receiver side: receipts, order within a flow, effects exactly once."""

from __future__ import annotations

import pytest

import fairq


@pytest.fixture
def receiver(store):
    """Where the receiver's inbox and its own tables live."""
    return store.target("receiver")


@pytest.fixture
def inbox(store, receiver):
    with store.open_inbox(receiver) as ib:
        yield ib


@pytest.fixture
def effects_db(store, receiver):
    """A receiver's database with the application's own effects table."""
    store.sql(receiver, "CREATE TABLE effects (n INTEGER)")
    return receiver


def test_a_new_event_next_in_its_flow_is_accepted_and_its_effect_runs(store, inbox: fairq.Inbox) -> None:
    calls = []
    r = inbox.receive("e1", "F", 1, {"x": 1}, apply=lambda conn: calls.append(conn))
    assert r is fairq.Receipt.ACCEPTED and r.outcome is fairq.ACK
    assert len(calls) == 1 and isinstance(calls[0], store.Connection)
    assert inbox.last_seq("F") == 1


def test_the_same_delivery_again_is_a_duplicate_and_nothing_runs(inbox: fairq.Inbox) -> None:
    inbox.receive("e1", "F", 1, {"x": 1, "y": [1, 2]})
    calls = []
    r = inbox.receive("e1", "F", 1, {"y": [1, 2], "x": 1}, apply=lambda c: calls.append(c))
    assert r is fairq.Receipt.DUPLICATE and r.outcome is fairq.ACK and calls == []


@pytest.mark.parametrize("flow, seq, body", [("F", 1, {"x": 2}), ("G", 1, {"x": 1}), ("F", 2, {"x": 1}),
                                             ("F", 1, {"x": 1.0})])
def test_the_same_id_with_other_content_is_an_id_conflict(inbox, flow, seq, body) -> None:
    inbox.receive("e1", "F", 1, {"x": 1})
    r = inbox.receive("e1", flow, seq, body)
    assert r is fairq.Receipt.ID_CONFLICT and r.outcome is fairq.FAIL


def test_another_id_at_a_taken_seq_is_a_sequence_conflict(inbox: fairq.Inbox) -> None:
    inbox.receive("e1", "F", 1, {})
    inbox.receive("e2", "F", 2, {})
    for seq in (1, 2):
        r = inbox.receive("intruder", "F", seq, {})
        assert r is fairq.Receipt.SEQUENCE_CONFLICT and r.outcome is fairq.FAIL
    assert inbox.received("F") == 2


def test_a_seq_ahead_of_the_next_is_a_gap_to_retry(inbox: fairq.Inbox) -> None:
    r = inbox.receive("e3", "F", 3, {})
    assert r is fairq.Receipt.GAP and r.outcome is fairq.RETRY
    assert inbox.received() == 0


def test_unordered_deliveries_skip_the_sequence_check(inbox: fairq.Inbox) -> None:
    assert inbox.receive("a", None, 1, {}) is fairq.Receipt.ACCEPTED
    assert inbox.receive("b", None, 1, {}) is fairq.Receipt.ACCEPTED
    assert inbox.receive("a", None, 1, {}) is fairq.Receipt.DUPLICATE


def test_a_failing_effect_writes_no_receipt_and_propagates(store, effects_db) -> None:
    path = effects_db
    with store.open_inbox(path) as inbox:
        def boom(c) -> None:
            c.execute("INSERT INTO effects VALUES (1)")
            raise RuntimeError("effect failed")

        with pytest.raises(RuntimeError, match="effect failed"):
            inbox.receive("e1", "F", 1, {}, apply=boom)
        assert inbox.received() == 0
        # The delivery can come again and be accepted this time.
        assert inbox.receive("e1", "F", 1, {}, apply=lambda c: c.execute("INSERT INTO effects VALUES (2)")) \
            is fairq.Receipt.ACCEPTED
    assert [tuple(row) for row in store.sql(path, "SELECT n FROM effects")] == [(2,)]


@pytest.mark.parametrize("args, field", [
    (("", "F", 1, {}), "event_id"),
    (("e", "", 1, {}), "flow"),
    (("e", "F", 0, {}), "seq"),
    (("e", "F", True, {}), "seq"),
    (("e", "F", 1, {"x": float("nan")}), "body.x"),
])
def test_bad_deliveries_are_refused_with_the_field_named(inbox, args, field) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        inbox.receive(*args)
    assert info.value.field == field
    assert inbox.received() == 0


