"""Tenants under real concurrency on one PostgreSQL queue: eight processes
running every verb across tenants (capped, rate-limited, plain) meet no
deadlock, each event is acked once, and the counts recount exactly; a cap
holds across eight processes; and a settle that frees a slot while a claim
judges the tenant at its cap never leaves the tenant held with a slot free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import fairq
from helpers import ROOT
from pgcheck import check_pg_invariants
from pgcluster import require_psycopg
from pgpause import PAUSED, held, pause_at, wait_paused, with_name
from pgsessions import waiting_for_a_lock
from test_pg_concurrency import server_deadlocks

psycopg = require_psycopg()

WORKER = Path(__file__).with_name("pg_tenant_worker.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def run_workers(url: str, mode: str, seconds: float, n: int = 8) -> list[dict[str, object]]:
    procs = [subprocess.Popen([sys.executable, str(WORKER), url, str(seed), str(seconds), mode],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for seed in range(n)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)  # only stops a hang
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    return reports


def test_eight_processes_claiming_settling_and_enqueueing_across_tenants_stay_exact(pg_url: str) -> None:
    with fairq.Queue(pg_url, max_attempts=3) as q:
        q.set_tenant("capped", max_inflight=2)
        q.set_tenant("rated", rate=50, burst=5)
        q.set_tenant("big", weight=3)
        q.enqueue_many([{"event_id": f"pre-{i}", "body": {}, "flow": f"big-f{i % 20}", "tenant": "big"}
                        for i in range(200)])
    before = server_deadlocks(pg_url)
    reports = run_workers(pg_url, "mixed", 6)
    assert sum(int(r["deadlocks"]) for r in reports) == 0, reports  # type: ignore[call-overload]
    assert server_deadlocks(pg_url) == before
    errors = [e for r in reports for e in r["errors"]]  # type: ignore[attr-defined]
    assert errors == []
    acked = Counter(e for r in reports for e in r["acked"])  # type: ignore[attr-defined]
    assert acked and max(acked.values()) == 1  # each event acked once
    check_pg_invariants(pg_url)  # tenant.runnable and every count recounted exactly
    with fairq.Queue(pg_url) as q:
        for event_id in acked:
            assert q.get(event_id).state is fairq.State.ACKED
        stats = q.stats()
        assert stats.totals["enqueued"] == sum(stats.counts.values())


def test_a_tenants_cap_holds_across_eight_processes(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        q.set_tenant("C", max_inflight=3)
        q.enqueue_many([{"event_id": f"c{i}", "body": {}, "flow": f"cf{i}", "tenant": "C"} for i in range(600)])
        q.enqueue_many([{"event_id": f"o{i}", "body": {}, "flow": f"of{i % 50}", "tenant": "O"} for i in range(300)])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE observed (n integer NOT NULL)")
        conn.execute("INSERT INTO observed VALUES (0)")
    reports = run_workers(pg_url, "capped", 20)
    most = max(int(r["most"]) for r in reports)  # type: ignore[call-overload]
    assert 1 <= most <= 3, reports
    with fairq.Queue(pg_url) as q:
        [c, o] = q.tenants()
        assert (c.ready, c.inflight, o.ready) == (0, 0, 0)  # all done: the cap never stalled the drain
    check_pg_invariants(pg_url)


def test_a_settle_in_flight_keeps_a_claim_from_holding_its_tenant_with_a_slot_about_to_free(pg_url: str) -> None:
    # The settle has run its hold-clearing step (nothing was held) but not
    # committed; the claim beside it counts A at its cap in its snapshot. It
    # must not hold A until a1's lease end: it skips A unheld, and the next
    # claim once the settle commits takes a2.
    settler = fairq.Queue(with_name(pg_url, PAUSED))
    claimer = fairq.Queue(pg_url)
    try:
        claimer.set_tenant("A", max_inflight=1)
        claimer.enqueue_many([("a1", {}, "fa1", "A"), ("a2", {}, "fa2", "A")])
        first = claimer.claim(lease_seconds=600)
        assert first is not None and first.event_id == "a1"
        pause_at(pg_url, "fairq_settle", "        PERFORM fairq_tenants_touched('{}', '{}', v_freed);")
        with held(pg_url):
            acking = threading.Thread(target=lambda: settler.ack(first))
            acking.start()
            wait_paused(pg_url)  # the ack's step ran; it holds A's key shared and has not committed
            assert claimer.claim() is None  # A looks full in this claim's snapshot
            with psycopg.connect(pg_url, autocommit=True) as conn:
                assert conn.execute("SELECT held_until_ms FROM tenant WHERE name = 'A'").fetchone()[0] == 0
        acking.join(30)
        assert not acking.is_alive()
        second = claimer.claim()
        assert second is not None and second.event_id == "a2"  # not held until a1's lease would have ended
    finally:
        settler.close()
        claimer.close()
    check_pg_invariants(pg_url)


def test_a_claim_that_holds_a_tenant_at_its_cap_is_released_by_a_later_settle(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        q.set_tenant("A", max_inflight=1)
        q.enqueue_many([("a1", {}, "fa1", "A"), ("a2", {}, "fa2", "A")])
        first = q.claim(lease_seconds=600)
        assert first is not None and q.claim() is None  # A is held until a1's lease end
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute("SELECT held_until_ms FROM tenant WHERE name = 'A'").fetchone()[0] > 0
        q.ack(first)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute("SELECT held_until_ms FROM tenant WHERE name = 'A'").fetchone()[0] == 0
        second = q.claim()
        assert second is not None and second.event_id == "a2"
    check_pg_invariants(pg_url)


@pytest.mark.parametrize("verb", ["ack", "extend"])
def test_a_settle_whose_clock_read_precedes_a_claim_that_saw_its_lease_end_hears_it_expired(
        pg_url: str, verb: str) -> None:
    # The settle reads the server's clock before its lease end and is held
    # there; a claim then reads a later clock, sees the lease over and puts
    # the head back in the rotation (counted on its tenant, which is out of
    # tokens, so the head stays unclaimed). The held settle must not ack or
    # extend on its earlier reading: that would leave a head out of the
    # rotation that its tenant still counts, or a live lease in the rotation.
    function = {"ack": "fairq_settle", "extend": "fairq_extend"}[verb]
    holder = fairq.Queue(with_name(pg_url, PAUSED))
    claimer = fairq.Queue(pg_url)
    try:
        claimer.set_tenant("A", rate=1, burst=1)
        claimer.enqueue("a1", {}, flow="fa", tenant="A")
        lease = claimer.claim(lease_seconds=0.4)
        assert lease is not None
        pause_at(pg_url, function, "    SELECT t.call_ms, t.stored_ms INTO v_now, v_stored "
                                   "FROM fairq_call_time(p_model, p_requested, p_explicit) AS t;")
        outcome: list[BaseException | None] = []

        def settle() -> None:
            try:
                holder.ack(lease) if verb == "ack" else holder.extend(lease, 5)
                outcome.append(None)
            except BaseException as exc:  # judged below
                outcome.append(exc)

        with held(pg_url):
            settling = threading.Thread(target=settle)
            settling.start()
            wait_paused(pg_url)  # its clock was read before the lease end
            while time.time() < lease.lease_until + 0.05:  # the server's clock is this host's
                time.sleep(0.02)
            assert claimer.claim() is None  # the head is back in the rotation; A has no token
            with psycopg.connect(pg_url, autocommit=True) as conn:
                assert conn.execute("SELECT runnable FROM tenant WHERE name = 'A'").fetchone()[0] == 1
        settling.join(30)
        assert not settling.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], fairq.LeaseExpired), outcome
        assert claimer.get("a1").state is fairq.State.INFLIGHT  # nothing written
    finally:
        holder.close()
        claimer.close()
    check_pg_invariants(pg_url)  # the tenant's runnable count matches its heads


def test_a_claim_that_locks_a_tenant_whose_hold_ended_meanwhile_waits_only_above_it(pg_url: str) -> None:
    # The claim sees B's hold over and locks B's row; B's hold is ended by
    # another transaction while the claim waits for that row. The claim holds
    # B even though B no longer needs its write, so it must not then wait for
    # A (placed below B in tenant_id order) while another transaction that
    # holds A waits for B: it skips A instead. Waiting would be a deadlock.
    claimer = fairq.Queue(with_name(pg_url, "claimer"))
    try:
        claimer.enqueue("a1", {}, flow="fa", tenant="A")
        claimer.set_tenant("B")
        with psycopg.connect(pg_url) as ender, psycopg.connect(pg_url) as holder:
            ender.execute("UPDATE tenant SET held_until_ms = 1 WHERE name = 'B'")
            ender.commit()
            ender.execute("UPDATE tenant SET held_until_ms = 0 WHERE name = 'B'")  # not committed yet
            got: list[object] = []
            claiming = threading.Thread(target=lambda: got.append(claimer.claim()))
            claiming.start()
            deadline = time.monotonic() + 30
            while not waiting_for_a_lock(pg_url, "claimer"):  # for B's row
                assert time.monotonic() < deadline
                time.sleep(0.01)
            holder.execute("SELECT FROM tenant WHERE name = 'A' FOR NO KEY UPDATE")
            ender.commit()
            while claiming.is_alive() and not waiting_for_a_lock(pg_url, "claimer"):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            claiming.join(0.2)
            assert not claiming.is_alive() and got == [None]  # it skipped A, held by another transaction
            holder.execute("SELECT FROM tenant WHERE name = 'B' FOR NO KEY UPDATE")  # free: no deadlock
            holder.rollback()
        lease = claimer.claim()
        assert lease is not None and lease.event_id == "a1"
    finally:
        claimer.close()
    check_pg_invariants(pg_url)
