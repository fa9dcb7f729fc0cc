"""Discard and pause on PostgreSQL: an upgrade from the schema before them
keeps every row; a discard and a claim of the same head, at once in two
sessions, never both win; every path that makes a head in a paused flow
leaves it out of the rotation, and a resume puts it back."""

from __future__ import annotations

import threading
import time

import pytest

import fairq
from fairq.stores.postgres import schema
from pgcheck import check_pg_invariants
from pgcluster import require_psycopg
from pgold import back_to
from pgpause import PAUSED, held, pause_at, wait_paused, with_name
from pgsessions import HANG, waiting_for_a_lock

psycopg = require_psycopg()


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def stored(url: str) -> list[list[tuple[object, ...]]]:
    """The rows an upgrade must keep (the columns every version has)."""
    return [rows(url, "SELECT id, event_id, flow_id, seq, body, state, generation, attempts, lifetime_attempts, "
                      "created_ms, due_ms, next_at_ms, lease_until_ms, owner, reason, first_claim_ms, settled_ms, "
                      "tenant_id FROM event ORDER BY id"),
            rows(url, "SELECT event_pk, flow_id, pass, turn, dispatch_ms, runnable, tenant_id FROM head "
                      "ORDER BY event_pk"),
            rows(url, "SELECT flow_id, name, weight, next_seq, tenant_id FROM flow ORDER BY flow_id"),
            rows(url, "SELECT * FROM audit ORDER BY id"), rows(url, "SELECT * FROM tenant ORDER BY tenant_id"),
            rows(url, "SELECT name, sum(n) FROM counter GROUP BY name ORDER BY name")]


def test_an_upgrade_to_discard_and_pause_keeps_every_row_and_then_both_work(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("b1", {}, "B", "T"), ("b2", {}, "B", "T"),
                        ("c1", {}, "C"), ("u1", {"n": 1}, None)], now=0)
        q.enqueue("d1", {}, flow="D", delay=60, now=0)
        leases = {lease.event_id: lease for lease in q.claim_many(4, now=1)}
        q.fail(leases["a1"], "poison", now=1)
        q.ack(leases["b1"], now=1)
    back_to(pg_url, 7)
    checks = [r[0] for r in rows(pg_url, "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                                         "WHERE conrelid = 'event'::regclass AND contype = 'c'")]
    assert not any("discarded" in c for c in checks)  # the old state checks, as version 7 had them
    before = stored(pg_url)
    with fairq.Queue(pg_url, clock="model") as q:
        assert q.schema_version == schema.LATEST >= 8
        assert stored(pg_url) == before  # every row as it was
        assert rows(pg_url, "SELECT count(*) FROM head WHERE paused")[0][0] == 0
        check_pg_invariants(pg_url)
        q.discard("a1", expected_generation=q.get("a1").generation, reason="poison", actor="ops", now=2)
        q.pause("C", reason="hold", now=2)
        stats = q.stats(now=2)
        assert (stats.counts["discarded"], stats.counts["quarantined"]) == (1, 0)
        assert stats.blocked_flows == 1  # C: paused with a head
        got = [lease.event_id for lease in q.claim_many(10, now=100)]
        assert sorted(got) == ["a2", "b2", "d1", "u1"]  # u1 again: its lease (from 1, until 31) ended...
        assert q.claim(now=100) is None  # ...and so did c1's, but C is paused
        q.resume("C", now=100)
        lease = q.claim(now=100)
        assert lease is not None and lease.event_id == "c1"
    check_pg_invariants(pg_url)


# -- a discard racing a claim of the same head, in two sessions ------------------------------------------


def test_a_claim_holding_the_head_wins_and_the_discard_waits_then_is_refused(pg_url: str) -> None:
    claimer = fairq.Queue(with_name(pg_url, PAUSED))
    operator = fairq.Queue(with_name(pg_url, "operator"))
    try:
        claimer.enqueue_many([("x1", {}, "X"), ("x2", {}, "X")])
        pause_at(pg_url, "fairq_claim", "            v_locked := v_locked + 1;")
        got: dict[str, object] = {}
        with held(pg_url):
            tc = threading.Thread(target=lambda: got.update(lease=claimer.claim()))
            tc.start()
            wait_paused(pg_url)  # the claim holds x1's head and has not committed
            td = threading.Thread(target=lambda: got.update(discard=_discard(operator, "x1", 0)))
            td.start()
            deadline = time.monotonic() + HANG
            while td.is_alive() and not waiting_for_a_lock(pg_url, "operator") and time.monotonic() < deadline:
                time.sleep(0.01)
            assert td.is_alive()  # the discard waits for the head, never skips it
        tc.join(HANG)
        td.join(HANG)
        lease = got["lease"]
        assert isinstance(lease, fairq.Lease) and lease.event_id == "x1"
        refused = got["discard"]
        assert isinstance(refused, fairq.RedriveRefused) and "inflight" in str(refused)
        stats = operator.stats()
        assert (stats.counts["inflight"], stats.counts["ready"], stats.counts["discarded"]) == (1, 1, 0)
    finally:
        claimer.close()
        operator.close()
    check_pg_invariants(pg_url)


def test_a_discard_holding_the_head_wins_and_the_claim_passes_it_by(pg_url: str) -> None:
    operator = fairq.Queue(with_name(pg_url, PAUSED))
    claimer = fairq.Queue(with_name(pg_url, "claimer"))
    try:
        operator.enqueue_many([("x1", {}, "X"), ("x2", {}, "X")])
        pause_at(pg_url, "fairq_discard", "    ORDER BY event_pk FOR UPDATE;")
        got: dict[str, object] = {}
        with held(pg_url):
            td = threading.Thread(target=lambda: got.update(discard=_discard(operator, "x1", 0)))
            td.start()
            wait_paused(pg_url)  # the discard holds x1's head and has not committed
            got["lease"] = claimer.claim()  # skips the held head at once: nothing else is claimable
        td.join(HANG)
        assert got["lease"] is None and got["discard"] == 1
        lease = claimer.claim()
        assert lease is not None and lease.event_id == "x2"  # the flow went on after the discard
        stats = claimer.stats()
        assert (stats.counts["inflight"], stats.counts["ready"], stats.counts["discarded"]) == (1, 0, 1)
    finally:
        claimer.close()
        operator.close()
    check_pg_invariants(pg_url)


def test_discards_and_claims_racing_in_two_sessions_never_both_take_a_head(pg_url: str) -> None:
    claimer, operator = fairq.Queue(pg_url), fairq.Queue(pg_url)
    rounds = 30
    try:
        for i in range(rounds):  # only the flow of the round being run is claimable
            operator.pause(f"R{i}", reason="not its round")
        claimer.enqueue_many([(f"r{i}-{k}", {}, f"R{i}") for i in range(rounds) for k in (1, 2)])
        won = {"claim": 0, "discard": 0}
        for i in range(rounds):
            head = f"r{i}-1"
            operator.resume(f"R{i}")
            barrier = threading.Barrier(2)
            got: dict[str, object] = {}

            def claim() -> None:
                barrier.wait()
                got["lease"] = claimer.claim()

            def discard() -> None:
                barrier.wait()
                got["discard"] = _discard(operator, head, 0)

            threads = [threading.Thread(target=claim), threading.Thread(target=discard)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(HANG)
            lease, discarded = got["lease"], got["discard"]
            took = isinstance(lease, fairq.Lease) and lease.event_id == head
            assert took != (discarded == 1), (lease, discarded)  # exactly one of them took the head
            won["claim" if took else "discard"] += 1
            if took:
                assert isinstance(discarded, fairq.RedriveRefused) and "inflight" in str(discarded)
                claimer.ack(lease)  # type: ignore[arg-type]
            if isinstance(lease, fairq.Lease) and not took:
                claimer.ack(lease)  # the flow's next event, after the discard
            operator.pause(f"R{i}", reason="round over")
        stats = operator.stats()
        assert stats.counts["discarded"] == won["discard"] and stats.totals["discarded"] == won["discard"]
        assert stats.counts["inflight"] == 0
        assert stats.counts["discarded"] + stats.counts["acked"] + stats.counts["ready"] == 2 * rounds
    finally:
        claimer.close()
        operator.close()
    check_pg_invariants(pg_url)


def _discard(q: fairq.Queue, event_id: str, generation: int) -> int | fairq.RedriveRefused:
    try:
        return q.discard(event_id, expected_generation=generation, reason="race")
    except fairq.RedriveRefused as exc:
        return exc


# -- paused flows: every path that makes a head leaves it out -------------------------------------------


def heads(url: str) -> dict[str, tuple[bool, bool]]:
    """Each head's event id: (runnable, paused)."""
    return {r[0]: (r[1], r[2]) for r in rows(url, "SELECT e.event_id, h.runnable, h.paused FROM head AS h "
                                                  "JOIN event AS e ON e.id = h.event_pk")}


def test_every_path_that_makes_a_head_in_a_paused_flow_leaves_it_out_until_resume(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.pause("E", reason="hold", now=0)
        q.enqueue_many([("e1", {}, "E", "T"), ("e2", {}, "E", "T")], now=0)  # enqueue to an empty paused flow
        q.enqueue("w1", {}, flow="W", delay=5, now=0)  # due later: promotion must pass it by
        q.enqueue_many([("x1", {}, "X"), ("x2", {}, "X"), ("s1", {}, "S"), ("v1", {}, "V")], now=0)
        leases = {lease.event_id: lease for lease in q.claim_many(3, now=0)}
        assert set(leases) == {"x1", "s1", "v1"}
        q.fail(leases["s1"], "poison", now=0)
        for flow in ("W", "X", "S", "V"):
            q.pause(flow, reason="hold", now=0)
        assert all(paused and not runnable for runnable, paused in heads(pg_url).values())
        q.ack(leases["x1"], now=1)  # ack: x2 becomes a paused head
        q.redrive("s1", expected_generation=leases["s1"].generation, reason="again", now=1)  # redrive
        q.discard("e1", expected_generation=0, reason="skip", now=1)  # discard: e2 becomes a paused head
        assert q.claim(now=60) is None  # w1 due, v1's lease over: neither promoted, nothing claimed
        stats = q.stats(now=60)
        assert (stats.claimable_now, stats.blocked_flows) == (0, 5)
        assert q.why_blocked("W", now=60).why == "paused"
        assert heads(pg_url) == {"e2": (False, True), "w1": (False, True), "x2": (False, True),
                                 "s1": (False, True), "v1": (False, True)}
        check_pg_invariants(pg_url)
        for flow in ("E", "W", "X", "S", "V"):
            q.resume(flow, now=60)
        assert q.stats(now=60).claimable_now == 5
        got = sorted(lease.event_id for lease in q.claim_many(10, now=60))
        assert got == ["e2", "s1", "v1", "w1", "x2"]  # v1 again: its lease had ended
    check_pg_invariants(pg_url)


def test_a_resumed_head_keeps_its_rotation_place(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue_many([("a1", {}, "A"), ("b1", {}, "B"), ("c1", {}, "C")], now=0)
        place = rows(pg_url, "SELECT pass, turn FROM head AS h JOIN event AS e ON e.id = h.event_pk "
                             "WHERE e.event_id = 'a1'")
        q.pause("A", reason="hold", now=0)
        q.resume("A", now=0)
        assert rows(pg_url, "SELECT pass, turn FROM head AS h JOIN event AS e ON e.id = h.event_pk "
                            "WHERE e.event_id = 'a1'") == place
        assert [lease.event_id for lease in q.claim_many(3, now=0)] == ["a1", "b1", "c1"]


@pytest.mark.parametrize("tenant", [None, "T"])
def test_pausing_twice_or_resuming_an_unpaused_flow_writes_nothing(pg_url: str, tenant: str | None) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue("a1", {}, flow="A", tenant=tenant, now=0)
        q.pause("A", reason="hold", now=0)
        before = rows(pg_url, "SELECT * FROM audit ORDER BY id"), rows(pg_url, "SELECT * FROM flow ORDER BY 1")
        q.pause("A", reason="again", now=1)
        q.resume("B", now=1)  # never seen: no flow row is made
        after = rows(pg_url, "SELECT * FROM audit ORDER BY id"), rows(pg_url, "SELECT * FROM flow ORDER BY 1")
        assert after == before
        [flow] = q.flows(now=1)
        assert flow.paused
        blocked = q.why_blocked("A", now=1)
        assert (blocked.why, blocked.reason) == ("paused", "hold")
    check_pg_invariants(pg_url)


def test_a_flows_backlog_and_its_tenants_ready_events_leave_out_what_was_discarded(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue_many([(f"a{i}", {}, "A", "T") for i in range(1, 6)], now=0)
        q.discard_many([("a2", 0), ("a3", 0), ("a5", 0)], reason="not needed", now=0)
        assert q.stats(now=0, top=1).top_flows == (("A", 2),)  # a1 and a4
        assert q.tenants(now=0)[0].ready == 2
        check_pg_invariants(pg_url)  # the flow's count of discarded events behind its head
        lease = q.claim(now=0)
        assert lease is not None and lease.event_id == "a1"
        q.ack(lease, now=0)  # the head passes a2 and a3
        assert q.stats(now=0, top=1).top_flows == (("A", 1),)
        check_pg_invariants(pg_url)
        assert [lease.event_id for lease in q.claim_many(5, now=0)] == ["a4"]
        assert q.tenants(now=0)[0].ready == 0
    check_pg_invariants(pg_url)
