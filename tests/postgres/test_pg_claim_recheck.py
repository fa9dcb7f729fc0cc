"""Claims on many connections stay fair: a head another claimer moved between
this claim's candidate read and its lock is not taken at its new place.

The two claimers are interleaved deterministically: claimer A's claim (one
statement, fairq_claim) is paused in the server right after it has read its
candidates and before it locks them (pgpause); claimer B runs a whole claim
and retry there. A claim takes only candidates whose rotation place (pass,
turn) is still the one it read; a moved head is left for the next claim, at
its new place."""

from __future__ import annotations

import threading

import fairq
from pgcluster import require_psycopg
from pgpause import PAUSED, held, pause_at, wait_paused, with_name

psycopg = require_psycopg()


def test_a_head_requeued_between_the_candidate_read_and_the_lock_is_not_taken_at_its_new_place(
        pg_url: str) -> None:
    a = fairq.Queue(with_name(pg_url, PAUSED))
    b = fairq.Queue(pg_url)
    try:
        a.enqueue("f1", {}, flow="F")  # the head of F, first in rotation
        a.enqueue("g1", {}, flow="G")  # the head of G, second
        pause_at(pg_url, "fairq_claim", "              ORDER BY h.pass, h.turn LIMIT least(2 * v_want + 2, 1000)) AS c;")
        leases: list[fairq.Lease] = []
        with held(pg_url):
            claimer = threading.Thread(target=lambda: leases.extend(a.claim_many(2)))
            claimer.start()
            wait_paused(pg_url)  # A has read F's head and G's, at their places, and locked neither
            # B claims F's head and gives it back at once: F's head is
            # runnable again, but one stride further along the rotation.
            lease = b.claim()
            assert lease is not None and lease.event_id == "f1"
            b.retry(lease, "busy", delay=0)
        claimer.join(timeout=60)
        assert not claimer.is_alive()
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
