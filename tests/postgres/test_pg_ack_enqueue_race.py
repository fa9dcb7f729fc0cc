"""An ack of a flow's last event and an enqueue into that flow, at once, on
two connections: one of them always sees the other, so the new event becomes
the flow's head and is claimable (the flow row serialises them).

Interleaved deterministically: the ack stops after it has looked for the
flow's next event and before it commits (in the server, inside the
function fairq_settle: pgpause, whether the ack is one statement or, with
an effect, runs it inside its own transaction); the enqueue then runs in
another thread, and the ack goes on once the enqueue waits for the flow's
row lock (or has finished)."""

from __future__ import annotations

import threading
import time

import fairq
from pgcheck import check_pg_invariants
from pgpause import PAUSED, held, pause_at, wait_paused, with_name
from pgsessions import HANG, waiting_for_a_lock


def assert_the_new_event_heads_the_flow(q: fairq.Queue) -> None:
    """f1 was acked, and f2, enqueued while that ack ran, is F's head now."""
    assert q.get("f1").state is fairq.State.ACKED
    follow = q.claim()
    assert follow is not None and follow.event_id == "f2"  # F's new event is its head


def test_an_enqueue_racing_the_one_statement_ack_of_its_flows_last_event_becomes_the_head(pg_url: str) -> None:
    acker = fairq.Queue(with_name(pg_url, PAUSED))
    sender = fairq.Queue(with_name(pg_url, "sender"))
    try:
        acker.enqueue("f1", {}, flow="F")
        lease = acker.claim()
        assert lease is not None
        pause_at(pg_url, "fairq_settle", "        INTO v_ready, v_due FROM n;")
        with held(pg_url):
            ta = threading.Thread(target=lambda: acker.ack(lease))
            ta.start()
            wait_paused(pg_url)  # the ack found no next event; it has not committed
            tb = threading.Thread(target=lambda: sender.enqueue("f2", {}, flow="F"))
            tb.start()
            deadline = time.monotonic() + HANG
            while tb.is_alive() and not waiting_for_a_lock(pg_url, "sender") and time.monotonic() < deadline:
                time.sleep(0.01)
        ta.join(HANG)
        tb.join(HANG)
        assert not ta.is_alive() and not tb.is_alive()
        assert_the_new_event_heads_the_flow(acker)
    finally:
        acker.close()
        sender.close()
    check_pg_invariants(pg_url)


def test_an_enqueue_racing_an_ack_with_an_effect_of_its_flows_last_event_becomes_the_head(pg_url: str) -> None:
    # A settle with an effect runs fairq_settle inside its own transaction, after the effect.
    acker = fairq.Queue(with_name(pg_url, PAUSED))
    sender = fairq.Queue(with_name(pg_url, "sender"))
    try:
        acker.enqueue("f1", {}, flow="F")
        lease = acker.claim()
        assert lease is not None
        pause_at(pg_url, "fairq_settle", "        INTO v_ready, v_due FROM n;")
        with held(pg_url):
            ta = threading.Thread(target=lambda: acker.ack(lease, effect=lambda conn: None))
            ta.start()
            wait_paused(pg_url)  # the ack found no next event; it has not committed
            tb = threading.Thread(target=lambda: sender.enqueue("f2", {}, flow="F"))
            tb.start()
            deadline = time.monotonic() + HANG
            while tb.is_alive() and not waiting_for_a_lock(pg_url, "sender") and time.monotonic() < deadline:
                time.sleep(0.01)
        ta.join(HANG)
        tb.join(HANG)
        assert not ta.is_alive() and not tb.is_alive()
        assert_the_new_event_heads_the_flow(acker)
    finally:
        acker.close()
        sender.close()
    check_pg_invariants(pg_url)
