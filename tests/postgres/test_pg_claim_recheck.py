"""Claims on many connections stay fair: a head another claimer moved between
this claim's candidate read and its lock is not taken at its new place.

The two claimers are interleaved deterministically: claimer B runs a whole
claim and retry right after claimer A has read its candidates and before A
locks them (a hook on A's statements). A claim takes only candidates whose
rotation place (pass, turn) is still the one it read; a moved head is left
for the next claim, at its new place."""

from __future__ import annotations

from typing import Any

import pytest

import fairq
from fairq.postgres.txn import TxnCore
from pgcluster import require_psycopg

psycopg = require_psycopg()


def test_a_head_requeued_between_the_candidate_read_and_the_lock_is_not_taken_at_its_new_place(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a = fairq.Queue(pg_url)
    b = fairq.Queue(pg_url)
    try:
        a.enqueue("f1", {}, flow="F")  # the head of F, first in rotation
        a.enqueue("g1", {}, flow="G")  # the head of G, second
        real = TxnCore.execute
        interleaved: list[str] = []

        def execute(self: TxnCore, sql: str, params: Any = None) -> Any:
            result = real(self, sql, params)
            if sql.startswith("SELECT event_pk, pass, turn FROM head") and not interleaved:
                interleaved.append("b")
                # B claims F's head and gives it back at once: F's head is
                # runnable again, but one stride further along the rotation.
                lease = b.claim()
                assert lease is not None and lease.event_id == "f1"
                b.retry(lease, "busy", delay=0)
            return result

        monkeypatch.setattr(TxnCore, "execute", execute)
        leases = a.claim_many(2)
        monkeypatch.undo()
        assert interleaved == ["b"]
        # A read F's head at its old place, first; F moved behind G meanwhile.
        # A locks only heads still where it read them: G's, and not F's at
        # its new place (which would let the rotation run ahead of F's turn).
        assert [lease.event_id for lease in leases] == ["g1"]
        again = a.claim()
        assert again is not None and again.event_id == "f1" and again.generation == 2
    finally:
        a.close()
        b.close()


def test_a_head_another_claimer_holds_is_skipped_without_waiting(pg_url: str) -> None:
    a = fairq.Queue(pg_url)
    try:
        for flow in "FGH":
            a.enqueue(f"{flow.lower()}1", {}, flow=flow)
        with psycopg.connect(pg_url) as holder:  # another claimer holds F's head, not yet committed
            holder.execute("SELECT event_pk FROM head WHERE flow_id = (SELECT flow_id FROM flow WHERE name = 'F') "
                           "FOR UPDATE")
            # A, meanwhile, skips the locked head and takes the next two in rotation order.
            got = [lease.event_id for lease in a.claim_many(2)]
            assert got == ["g1", "h1"]
            holder.rollback()
        assert a.get("f1").state is fairq.State.READY
        assert a.claim().event_id == "f1"
    finally:
        a.close()
