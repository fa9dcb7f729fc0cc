"""The rows every store reads, judged and converted on plain values: what
both the SQLite and the PostgreSQL store hand to fairq.kernel.rows."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import fairq
from fairq.kernel import claims, rows, rules
from fairq.types import UndecodableBody
from fairq.stores.backend import NewEvent
from fairq.kernel.rules import body_hash


def held(state: str = "inflight", generation: int = 3, lease_until_ms: int | None = 5_000) -> rows.Held:
    return rows.Held("e", 1, None, 1, state, generation, 1, 1, lease_until_ms, "w", None, None, None)


def test_a_fence_on_a_missing_row_is_stale_and_on_a_live_lease_passes() -> None:
    assert isinstance(rows.fence_held(None, "e", 3, 1_000), fairq.StaleLease)
    assert rows.fence_held(held(), "e", 3, 1_000) is None
    assert isinstance(rows.fence_held(held(), "e", 3, 1_000, settled=True), fairq.StaleLease)
    assert isinstance(rows.fence_held(held(), "e", 3, 6_000), fairq.LeaseExpired)


def test_a_live_lease_gives_its_row_and_a_lost_one_raises_what_the_fence_says() -> None:
    row = held()
    assert rows.held_live(row, "e", 3, 1_000) is row
    with pytest.raises(fairq.StaleLease):
        rows.held_live(None, "e", 3, 1_000)
    with pytest.raises(fairq.LeaseExpired):
        rows.held_live(row, "e", 3, 6_000)


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


# -- a claim's judgement of each head (fairq.kernel.claims) ---------------------


class Tx:
    """A transaction as the claim judgement sees it: what it counts, audits,
    quarantines and adds to the claim-lag histogram."""

    def __init__(self) -> None:
        self.moves: list[tuple[str | None, str, int]] = []
        self.totals: dict[str, int] = {}
        self.audits: list[dict[str, object]] = []
        self.quarantined: list[tuple[int, str | None]] = []
        self.lags: list[int] = []

    def moved(self, before: str | None, after: str, n: int = 1) -> None:
        self.moves.append((before, after, n))

    def happened(self, total: str, n: int = 1) -> None:
        self.totals[total] = self.totals.get(total, 0) + n

    def record(self, event_id: str, action: str, reason: str | None, actor: str | None,
               generation: int | None, now_ms: int, detail: dict[str, object]) -> None:
        self.append_audit([rows.audit_row(event_id, action, reason, actor, generation, now_ms, detail)])

    def append_audit(self, audit: list[dict[str, object]]) -> None:
        self.audits.extend(audit)

    def claim_lag(self, lag_ms: int) -> None:
        self.lags.append(lag_ms)

    def quarantine(self, ids: Sequence[int], reasons: Sequence[str | None]) -> None:
        self.quarantined.extend(zip(ids, reasons))


def head(state: str = "ready", *, body: str = '{"n":1}', attempts: int = 0, first_claim_ms: int | None = None,
         pass_: int = 100) -> claims.Head:
    return claims.Head(7, "e", "F", 2, 3, body, pass_, state, 4, attempts, attempts + 5,
                       None if state == "ready" else 900, None if state == "ready" else "old", 400, first_claim_ms)


def claim(tx: Tx, row: claims.Head) -> claims.Claimed | None:
    return claims.claim_head(tx, row, vtime=150, tail=300, owner="w", now_ms=1_000, lease_until_ms=31_000,
                             max_attempts=3)


def test_a_ready_heads_first_claim_takes_a_rotation_step_counts_its_lag_and_leases_the_next_generation() -> None:
    tx = Tx()
    got = claim(tx, head())
    assert got is not None and got.was_ready
    assert got.step == rules.rotate(100, 2, vtime=150, tail=300)
    assert (got.lease.event_id, got.lease.flow, got.lease.seq, got.lease.body, got.lease.generation,
            got.lease.attempts, got.lease.lifetime_attempts, got.lease.owner, got.lease.lease_until) == (
        "e", "F", 3, {"n": 1}, 5, 1, 6, "w", 31.0)
    assert tx.lags == [600] and tx.audits == [] and tx.totals == {} and tx.quarantined == []
    tx = Tx()
    assert claim(tx, head(first_claim_ms=500)) is not None and tx.lags == []  # a later claim adds no lag


def test_an_expired_lease_with_budget_left_is_claimed_again_and_audited() -> None:
    tx = Tx()
    got = claim(tx, head("inflight", attempts=2, first_claim_ms=500))
    assert got is not None and not got.was_ready and got.lease.attempts == 3
    assert tx.totals == {"expired": 1} and tx.quarantined == []
    assert [(a["action"], a["actor"], a["generation"]) for a in tx.audits] == [("expired", "old", 4)]


def test_an_expired_lease_whose_budget_is_spent_is_quarantined_with_its_audit_row() -> None:
    tx = Tx()
    assert claim(tx, head("inflight", attempts=3)) is None
    spent = rules.expired_lease_fate(3, 3)
    assert spent is not None
    assert tx.quarantined == [(7, spent.reason)]
    assert tx.moves == [("inflight", "quarantined", 1)] and tx.totals == {"expired": 1, "quarantined": 1}
    assert [(a["action"], a["reason"], a["actor"]) for a in tx.audits] == [("quarantine", spent.reason, "old")]
    assert tx.lags == []


@pytest.mark.parametrize("state", ["ready", "inflight"])
def test_a_head_whose_body_cannot_be_decoded_is_quarantined_from_the_state_it_was_in(state: str) -> None:
    tx = Tx()
    assert claim(tx, head(state, body="{not json")) is None
    assert len(tx.quarantined) == 1 and tx.quarantined[0][0] == 7
    assert str(tx.quarantined[0][1]).startswith("undecodable_body: ")
    assert tx.moves == [(state, "quarantined", 1)]
    assert [(a["action"], a["reason"], a["actor"]) for a in tx.audits] == [("quarantine", "undecodable_body", None)]


def test_heads_leased_before_their_bodies_were_decoded_are_quarantined_as_inflight() -> None:
    tx = Tx()
    lease = fairq.Lease("e", None, 1, None, 5, 1, 1, "w", 2.0)
    claims.quarantine_leased(tx, [(7, lease, UndecodableBody("{x", "bad")), (8, lease, UndecodableBody("{y", "worse"))],
                             1_000)
    assert tx.quarantined == [(7, "undecodable_body: bad"), (8, "undecodable_body: worse")]
    assert tx.moves == [("inflight", "quarantined", 1)] * 2 and tx.totals == {"quarantined": 2}
    assert [a["generation"] for a in tx.audits] == [5, 5]
