"""A process stopped while it holds row locks (SIGSTOP: as a paused VM, or a
host gone without a TCP reset) stalls no call on other flows. Stopped inside
a settle's effect, its transaction stays open; claims skip the heads it
holds and every transaction takes a shard of the bookkeeping that no other
one holds. A claim or settle is one statement: a process stopped just
before sending it holds nothing at all. A claim stopped inside the server,
beside another claim's promotion, is skipped too. Real processes, a real
server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fairq
from fairq.stores.postgres import READY_CHANNEL
from helpers import ROOT, SUPPORT
from pgcheck import check_pg_invariants
from pgcluster import require_psycopg
from pgpause import PAUSED, held, pause_at, wait_paused, with_name

psycopg = require_psycopg()

SRC = str(ROOT / "src")
#: Seconds any one call beside the stopped process may take (it used to wait until that process died).
BOUND = 2.0
#: A call still running after this long: the stopped process is killed, so the test fails instead of hanging.
WATCHDOG = 8.0
#: Seconds to wait for a condition (the child to stop, the server to see it gone).
PATIENCE = 30.0


def stopped(pid: int) -> bool:
    """Is the process stopped (state T in /proc)?"""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def until(condition: Callable[[], Any], what: str) -> Any:
    """Poll condition() until it is true, for at most PATIENCE seconds."""
    deadline = time.monotonic() + PATIENCE
    while not (result := condition()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)
    return result


def due_heads_waiting(url: str) -> int:
    """Heads due now that no committed claim has made runnable (a claim's promotion meets these)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute(
            "SELECT count(*) FROM head WHERE NOT runnable AND dispatch_ms <= "
            "(extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()[0])


@contextlib.contextmanager
def frozen(url: str, mode: str, lease_seconds: str = "0.3") -> Iterator[subprocess.Popen[bytes]]:
    """A child stopped inside its write (pg_frozen_child.py), killed after the block."""
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("FAIRQ_FREEZE_AT", None)
    if mode != "effect":
        env["FAIRQ_FREEZE_AT"] = f"{mode}.before_commit"
    child = subprocess.Popen([sys.executable, str(SUPPORT / "pg_frozen_child.py"), url, mode, lease_seconds], env=env,
                             stderr=subprocess.PIPE)
    try:
        until(lambda: child.poll() is not None or stopped(child.pid), "the child to stop")
        assert child.poll() is None, child.stderr.read() if child.stderr else b""
        yield child
    finally:
        child.kill()
        child.wait(timeout=PATIENCE)


def timed(child: subprocess.Popen[bytes], call: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds the call took, its result), asserting it took less than BOUND;
    a call still running after WATCHDOG kills the child (so it ends)."""
    watchdog = threading.Timer(WATCHDOG, child.kill)
    watchdog.start()
    began = time.monotonic()
    try:
        result = call()
    finally:
        watchdog.cancel()
    seconds = time.monotonic() - began
    assert seconds < BOUND, f"a call on another flow waited {seconds:.1f} s for the stopped process"
    return seconds, result


def sessions_of(url: str, application_name: str) -> list[tuple[str, int]]:
    """(state, locks held) of each server session of one application name."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [(str(state), int(n)) for state, n in conn.execute(
            "SELECT a.state, (SELECT count(*) FROM pg_locks AS l WHERE l.pid = a.pid AND l.granted) "
            "FROM pg_stat_activity AS a WHERE a.application_name = %s", (application_name,)).fetchall()]


@pytest.mark.parametrize("mode", ["claim", "settle"])
def test_a_process_stopped_before_its_one_statement_claim_or_settle_holds_nothing(pg_url: str, mode: str) -> None:
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([("f1", {}, "F"), ("f2", {}, "F"), ("g1", {}, "G")])
        with frozen(f"{pg_url}&application_name=frozen", mode, lease_seconds="600") as child:
            # Stopped where a transaction run from Python would hold its
            # locks: its sessions are idle, outside any transaction, no lock.
            found = sessions_of(pg_url, "frozen")
            assert found and all(state == "idle" and locks == 0 for state, locks in found), found
            with psycopg.connect(pg_url) as conn:  # every flow and head can be locked at once
                conn.execute("SET lock_timeout = '1s'")
                conn.execute("SELECT FROM flow FOR UPDATE")
                conn.execute("SELECT FROM head FOR UPDATE")
                conn.rollback()
            # Calls beside it take what it was about to take (the stopped
            # claim took nothing; the stopped ack keeps its lease on f1).
            _, leases = timed(child, lambda: q.claim_many(2))
            assert {lease.event_id for lease in leases} == ({"g1"} if mode == "settle" else {"f1", "g1"})
            timed(child, lambda: q.enqueue("f3", {}, flow="F"))
            timed(child, lambda: q.settle_many([(lease, "ack") for lease in leases]))
            assert child.poll() is None  # stopped all along
        assert {lease.event_id for lease in q.claim_many(3)} == (set() if mode == "settle" else {"f2"})
    check_pg_invariants(pg_url)


def test_calls_on_other_flows_do_not_wait_for_a_process_stopped_holding_locks_in_an_effect(pg_url: str) -> None:
    mode = "effect"
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([("f1", {}, "F"), ("f2", {}, "F")])
        took: dict[str, list[float]] = {"enqueue": [], "claim": [], "ack": []}
        with frozen(pg_url, mode) as child:
            # The stopped process holds a head that is due (its lease of 0.3 s
            # has ended, or it promoted it): every claim's promotion meets it.
            until(lambda: due_heads_waiting(pg_url), "a held head to be due")
            for i in range(20):
                seconds, _ = timed(child, lambda: q.enqueue(f"u{i}", {}, flow=f"U{i}"))
                took["enqueue"].append(seconds)
                seconds, lease = timed(child, q.claim)
                took["claim"].append(seconds)
                assert lease is not None and lease.event_id == f"u{i}"
                seconds, _ = timed(child, lambda: q.ack(lease))
                took["ack"].append(seconds)
            assert child.poll() is None  # stopped all along
        # Once the process is gone, what it held comes back.
        held = {"f1"}
        got: set[str] = set()
        until(lambda: got.update(lease.event_id for lease in q.claim_many(3)) or got == held,
              "the held heads to come back")
        stats = q.stats()
        assert stats.totals["acked"] == stats.counts["acked"] == 20
        assert stats.counts["inflight"] == len(held)
    check_pg_invariants(pg_url)


def test_a_call_waits_for_a_shard_only_when_every_shard_is_held(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q, psycopg.connect(pg_url) as holder:
        q.enqueue("warm", {}, flow="W")
        holder.execute("SELECT shard FROM rotation FOR UPDATE")
        pid = int(holder.execute("SELECT pg_backend_pid()").fetchone()[0])
        enqueued = threading.Thread(target=lambda: q.enqueue("e1", {}, flow="E"))
        enqueued.start()
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            until(lambda: watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %(pid)s = ANY(pg_blocking_pids(pid))",
                {"pid": pid}).fetchone()[0], "the enqueue to wait for a shard")
        assert enqueued.is_alive()
        holder.rollback()
        enqueued.join(timeout=PATIENCE)
        assert not enqueued.is_alive()
        assert q.stats().counts["ready"] == q.stats().totals["enqueued"] == 2
    check_pg_invariants(pg_url)


def test_a_claim_beside_another_claims_promotion_skips_its_heads_and_is_woken_when_it_commits(
        pg_url: str) -> None:
    a, b = fairq.Queue(with_name(pg_url, PAUSED)), fairq.Queue(pg_url)
    try:
        a.enqueue_many([{"event_id": f"h{i}", "body": {}, "flow": f"H{i}", "delay": 0.2} for i in range(3)])
        until(lambda: due_heads_waiting(pg_url) == 3, "the delayed heads to be due")
        # A's claim stops in the server once it has promoted the three heads (it holds them).
        pause_at(pg_url, "fairq_claim", "    INTO v_promoted, v_pt, v_pn FROM g;")
        with psycopg.connect(pg_url, autocommit=True) as listener:
            listener.execute(f"LISTEN {READY_CHANNEL}")
            listener.execute("SELECT pg_advisory_lock_shared(26228, 0)")  # a worker asleep
            taken: list[Any] = []
            with held(pg_url):
                claimer = threading.Thread(target=lambda: taken.append(a.claim()))
                claimer.start()
                wait_paused(pg_url)
                # B, beside it, does not wait for the heads A is promoting.
                _, beside = timed_alone(b.claim)
                assert beside is None  # B found nothing claimable while A held the heads
            claimer.join(timeout=WATCHDOG)
            assert not claimer.is_alive()
            assert taken[0] is not None and taken[0].event_id == "h0"
            # A took one of the three it promoted: its commit wakes workers for the other two.
            assert [n.channel for n in listener.notifies(timeout=2, stop_after=1)] == [READY_CHANNEL]
        assert [lease.event_id for lease in b.claim_many(3)] == ["h1", "h2"]
    finally:
        a.close()
        b.close()


def timed_alone(call: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds the call took, its result) for a call run in a thread; one
    still running after WATCHDOG fails the test (it waited)."""
    out: list[Any] = []
    began = time.monotonic()
    runner = threading.Thread(target=lambda: out.append(call()), daemon=True)
    runner.start()
    runner.join(WATCHDOG)
    assert not runner.is_alive(), "a claim waited for heads another claim was promoting"
    return time.monotonic() - began, out[0]
