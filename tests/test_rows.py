"""The rows every store reads, judged and converted on plain values: what
both the SQLite and the PostgreSQL store hand to fairq.kernel.rows."""

from __future__ import annotations

import pytest

import fairq
from fairq.kernel import rows
from fairq.stores.backend import NewEvent
from fairq.kernel.rules import body_hash


def held(state: str = "inflight", generation: int = 3, lease_until_ms: int | None = 5_000) -> rows.Held:
    return rows.Held("e", 1, None, 1, state, generation, 1, 1, lease_until_ms, "w", None, None, None)


def test_a_fence_on_a_missing_row_is_stale_and_on_a_live_lease_passes() -> None:
    assert isinstance(rows.fence_held(None, "e", 3, 1_000), fairq.StaleLease)
    assert rows.fence_held(held(), "e", 3, 1_000) is None
    assert isinstance(rows.fence_held(held(), "e", 3, 1_000, settled=True), fairq.StaleLease)
    assert isinstance(rows.fence_held(held(), "e", 3, 6_000), fairq.LeaseExpired)


def test_a_redrive_goes_on_only_for_a_quarantined_event_at_the_generation_seen() -> None:
    assert rows.redrive_refusal(held("quarantined", 3), "e", 3) is None
    for row, message in ((None, "does not exist"), (held("ready", 3), "is ready, not quarantined"),
                         (held("quarantined", 4), "at generation 4, not 3")):
        refused = rows.redrive_refusal(row, "e", 3)
        assert isinstance(refused, fairq.RedriveRefused) and message in str(refused)


def test_a_repeat_within_a_batch_collapses_onto_its_first_and_a_stored_id_keeps_its_seq() -> None:
    items = [NewEvent("a", "F", '{"n":1}', 0), NewEvent("b", "F", "{}", 0), NewEvent("a", "F", '{"n":1}', 0)]
    stored = {"b": rows.StoredId("b", "F", 7, "{}")}
    fresh = rows.fresh_events(items, stored)
    assert list(fresh) == ["a"]
    answers = rows.enqueued(items, stored, {"a": 8})
    assert [(e.event_id, e.seq, e.created) for e in answers] == [("a", 8, True), ("b", 7, False), ("a", 8, False)]


def test_a_repeat_that_differs_from_an_earlier_item_or_a_tombstones_hash_is_a_conflict() -> None:
    with pytest.raises(fairq.Conflict):
        rows.fresh_events([NewEvent("a", "F", "{}", 0), NewEvent("a", "G", "{}", 0)], {})
    tombstone = {"t": rows.StoredId("t", None, 1, body_hash('{"x":1}'))}
    assert rows.fresh_events([NewEvent("t", None, '{"x":1}', 0)], tombstone) == {}
    with pytest.raises(fairq.Conflict):
        rows.fresh_events([NewEvent("t", None, '{"x":2}', 0)], tombstone)


def test_a_schedule_row_becomes_a_schedule_in_seconds() -> None:
    made = rows.schedule(("s", 1500, None, None, '{"k":1}', "F", 2000, "skip", None, 0, None, 4000))
    assert (made.every, made.start, made.grace, made.paused, made.last_slot, made.next_slot) == (
        1.5, 2.0, None, False, None, 4.0)
    assert made.body == {"k": 1} and made.misfire is fairq.Misfire.SKIP
