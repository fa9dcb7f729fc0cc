"""Group commit: write calls made at once on one Queue share one transaction.

A group is forced, not hoped for: the first call's settle effect holds the
connection until the other callers (real threads) are waiting for it, so
they all join that call's transaction. Each call runs in its own savepoint:
its failure undoes only its own writes and reaches only its caller; a
COMMIT that fails makes every call of the group raise.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq
from helpers import check_invariants, eventually, stored_clock


def writers(q: fairq.Queue) -> Any:
    return q._store.db.writers  # type: ignore[attr-defined]


def holding_until(q: fairq.Queue, waiting: int) -> Callable[[sqlite3.Connection], None]:
    """A settle effect that keeps the connection until `waiting` calls wait for it."""
    def effect(conn: sqlite3.Connection) -> None:
        assert eventually(lambda: writers(q).waiting >= waiting, seconds=30)
    return effect


@contextlib.contextmanager
def holding_the_turn(path: Path) -> Iterator[None]:
    """The lock beside the file that writers queue for, held through another
    open file description (as another process holds it)."""
    fd = os.open(str(path) + "-lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def in_threads(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run each call on its own thread; each slot gets its result or its exception."""
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except BaseException as exc:
            out[i] = exc
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)  # the timeout only stops a hang
    return out


def leader_and_members(q: fairq.Queue, lease: fairq.Lease, members: list[Callable[[], Any]],
                       then: Callable[[sqlite3.Connection], None] | None = None) -> tuple[Any, list[Any]]:
    """Ack `lease` with an effect that runs `then`, starts the members and
    waits until every one of them waits for the connection."""
    started = threading.Event()

    def leader() -> Any:
        def effect(conn: sqlite3.Connection) -> None:
            if then is not None:
                then(conn)
            started.set()
            holding_until(q, len(members))(conn)
        return q.ack(lease, effect=effect)

    def member(call: Callable[[], Any]) -> Callable[[], Any]:
        def go() -> Any:
            assert started.wait(30)
            return call()
        return go
    results = in_threads([leader] + [member(c) for c in members])
    return results[0], results[1:]


def test_calls_made_at_once_share_one_commit(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue("lead", {})
    lease = q.claim()
    groups = writers(q).groups
    lead, members = leader_and_members(q, lease, [
        (lambda i=i: q.enqueue(f"e{i}", {"i": i}, flow=f"f{i}")) for i in range(7)])
    assert lead.state == "acked"
    assert all(m.created for m in members)
    assert writers(q).groups == groups + 1  # eight calls, one COMMIT
    assert {e.event_id for e in q.events(state="ready")} == {f"e{i}" for i in range(7)}
    q.close()
    check_invariants(tmp_path / "q.db")


def test_a_lone_call_commits_alone_at_once(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    before = writers(q).groups
    q.enqueue("a", {})
    q.enqueue("b", {})
    assert writers(q).groups == before + 2
    q.close()


def test_one_callers_failure_leaves_the_others_writes_committed(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue("lead", {}, flow="lead")
    q.enqueue("taken", {}, flow="taken")
    q.enqueue("fine", {}, flow="fine")
    q.enqueue("dup", {"v": 1}, flow="dup")
    lead = q.claim()
    leases = {lease.event_id: lease for lease in (q.claim(), q.claim(), q.claim())}
    stale = leases["taken"]
    q.extend(stale)  # still this generation, but a later settle below makes it stale
    q.ack(stale)

    def raising_effect(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS app (x)")
        conn.execute("INSERT INTO app VALUES (1)")
        raise RuntimeError("the effect failed")

    groups = writers(q).groups
    _, members = leader_and_members(q, lead, [
        lambda: q.ack(stale),  # StaleLease: settled already
        lambda: q.enqueue("dup", {"v": 2}, flow="dup"),  # Conflict
        lambda: q.ack(leases["fine"], effect=raising_effect),  # the effect raises
        lambda: q.ack(leases["dup"]),  # succeeds
        lambda: q.enqueue("new", {}, flow="new"),  # succeeds
    ])
    assert writers(q).groups == groups + 1  # one group, whose failed calls raised alone
    assert isinstance(members[0], fairq.StaleLease)
    assert isinstance(members[1], fairq.Conflict)
    assert isinstance(members[2], RuntimeError) and str(members[2]) == "the effect failed"
    assert members[3].state == "acked"
    assert members[4].created
    assert q.get("lead").state == "acked" and q.get("dup").state == "acked"
    assert q.get("new").state == "ready"
    assert q.get("fine").state == "inflight"  # its ack and its effect were undone, alone
    conn = sqlite3.connect(tmp_path / "q.db")
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'app'").fetchone()[0] == 0
    conn.close()
    q.close()
    check_invariants(tmp_path / "q.db")


def test_a_failed_commit_makes_every_call_of_the_group_raise(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = fairq.Queue(path)
    app = sqlite3.connect(path)
    # A deferred foreign key is checked at COMMIT: an orphan row makes the COMMIT fail.
    app.executescript("CREATE TABLE parent (id INTEGER PRIMARY KEY);"
                      "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);")
    app.close()
    q.enqueue("lead", {})
    lease = q.claim()

    def orphan(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO child VALUES (42)")

    lead, members = leader_and_members(q, lease, [
        (lambda i=i: q.enqueue(f"e{i}", {"i": i}, flow=f"f{i}")) for i in range(3)], then=orphan)
    for result in [lead, *members]:
        assert isinstance(result, fairq.StoreError), result
    assert q.get("lead").state == "inflight"
    assert all(q.get(f"e{i}") is None for i in range(3))
    # The queue goes on: the next group commits.
    assert q.enqueue("after", {}).created
    q.close()
    check_invariants(path)


def test_the_stored_clock_never_goes_back_across_a_group(tmp_path: Path) -> None:
    clock = [1_000.0]
    q = fairq.Queue(tmp_path / "q.db", clock=lambda: clock[0])
    q.enqueue("lead", {})
    lease = q.claim()

    def later(conn: sqlite3.Connection) -> None:
        clock[0] = 900.0  # the members read an earlier time than the leader ran at

    _, members = leader_and_members(q, lease, [
        (lambda i=i: q.enqueue(f"e{i}", {}, flow=f"f{i}")) for i in range(3)], then=later)
    assert all(m.created for m in members)
    assert q.get("lead").settled_at == 1_000.0
    assert {q.get(f"e{i}").created_at for i in range(3)} == {1_000.0}  # clamped, as one after another
    assert stored_clock(q) == 1_000_000
    q.close()
    check_invariants(tmp_path / "q.db")


def test_a_read_waits_for_the_open_group_to_commit(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue("lead", {})
    lease = q.claim()
    seen: list[str] = []

    def effect(conn: sqlite3.Connection) -> None:
        reader = threading.Thread(target=lambda: seen.append(q.get("lead").state))
        reader.start()
        reader.join(timeout=0.3)
        assert reader.is_alive()  # it waits: the ack is not committed yet
        effect_thread.append(reader)

    effect_thread: list[threading.Thread] = []
    q.ack(lease, effect=effect)
    effect_thread[0].join(timeout=30)
    assert seen == ["acked"]
    q.close()


def test_a_call_from_inside_its_own_effect_is_still_refused(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue("a", {})
    lease = q.claim()
    with pytest.raises(fairq.UsageError):
        q.ack(lease, effect=lambda conn: q.enqueue("b", {}))
    assert q.get("a").state == "inflight" and q.get("b") is None
    q.close()


def test_a_writer_of_another_process_holding_the_turn_past_the_busy_timeout_means_busy(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = fairq.Queue(path, busy_timeout=0.2)
    q.enqueue("a", {})
    with holding_the_turn(path):
        with pytest.raises(fairq.Busy):
            q.enqueue("b", {})
    assert q.get("b") is None
    assert q.enqueue("b", {}).created  # its turn came: the abandoned wait gave the lock back
    assert q.enqueue("c", {}).created
    q.close()


def test_a_writer_waiting_its_turn_goes_on_when_the_holder_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = fairq.Queue(path, busy_timeout=30)
    q.enqueue("a", {})
    result: list[Any] = []  # filled by the thread below
    with holding_the_turn(path):
        waiter = threading.Thread(target=lambda: result.append(q.enqueue("b", {})))
        waiter.start()
        waiter.join(timeout=0.3)
        assert waiter.is_alive()  # waiting in the kernel for its turn
    waiter.join(timeout=30)
    assert result[0].created
    q.close()


@pytest.mark.parametrize("ending", ["COMMIT", "ROLLBACK", "END", "RELEASE fairq_call", "with", "script"])
def test_an_effect_cannot_end_the_transaction_its_group_shares(tmp_path: Path, ending: str) -> None:
    """A grouped call's effect that tries to end the transaction is refused:
    it raises alone, and the other calls of its group are committed and told so."""
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue("lead", {}, flow="lead")
    q.enqueue("member", {}, flow="member")
    lead_lease, member_lease = q.claim(), q.claim()

    def ending_effect(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS app (x)")
        if ending == "with":
            with conn:  # commits on the way out
                conn.execute("INSERT INTO app VALUES (1)")
        elif ending == "script":
            conn.executescript("INSERT INTO app VALUES (1);")  # commits first
        else:
            conn.execute("INSERT INTO app VALUES (1)")
            conn.execute(ending)

    groups = writers(q).groups
    lead, members = leader_and_members(q, lead_lease, [
        lambda: q.enqueue("grouped", {}, flow="grouped"),
        lambda: q.ack(member_lease, effect=ending_effect),
    ])
    assert lead.state == "acked"
    assert members[0].created
    assert isinstance(members[1], fairq.UsageError), members[1]
    assert "tried to end the transaction it runs in" in str(members[1])
    assert writers(q).groups == groups + 1  # the group was not broken: one COMMIT for all
    assert q.get("lead").state == "acked" and q.get("grouped").state == "ready"
    assert q.get("member").state == "inflight"  # the refused call wrote nothing, its effect neither
    conn = sqlite3.connect(tmp_path / "q.db")
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'app'").fetchone()[0] == 0
    conn.close()
    q.close()
    check_invariants(tmp_path / "q.db")


def test_an_effect_that_swallows_the_refusal_still_fails_its_call(tmp_path: Path) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q.enqueue("a", {})
    lease = q.claim()

    def stubborn(conn: sqlite3.Connection) -> None:
        try:
            conn.execute("COMMIT")
        except sqlite3.DatabaseError:
            pass

    with pytest.raises(fairq.UsageError, match=r"tried to end the transaction it runs in \(COMMIT\)"):
        q.ack(lease, effect=stubborn)
    assert q.get("a").state == "inflight"
    # The connection is whole: the same lease acks, and an effect may use savepoints of its own.
    def own_savepoint(conn: sqlite3.Connection) -> None:
        conn.execute("SAVEPOINT mine")
        conn.execute("CREATE TABLE app (x)")
        conn.execute("RELEASE mine")
    assert q.ack(lease, effect=own_savepoint).state == "acked"
    q.close()
    check_invariants(tmp_path / "q.db")


def test_a_statement_that_rolls_back_the_whole_transaction_fails_every_call_it_undid(tmp_path: Path) -> None:
    """`INSERT OR ROLLBACK` ends the transaction without a COMMIT or ROLLBACK
    statement: every call whose writes it undid raises, and each caller's
    answer matches what the file holds."""
    q = fairq.Queue(tmp_path / "q.db")
    app = sqlite3.connect(tmp_path / "q.db")
    app.execute("CREATE TABLE app (id INTEGER PRIMARY KEY)")
    app.execute("INSERT INTO app VALUES (1)")
    app.commit()
    app.close()
    q.enqueue("lead", {}, flow="lead")
    q.enqueue("member", {}, flow="member")
    lead_lease, member_lease = q.claim(), q.claim()

    def rolls_back(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR ROLLBACK INTO app VALUES (1)")  # a duplicate: the whole transaction goes

    lead, members = leader_and_members(q, lead_lease, [
        lambda: q.enqueue("grouped", {}, flow="grouped"),
        lambda: q.ack(member_lease, effect=rolls_back),
    ])
    assert isinstance(lead, fairq.StoreError), lead  # its ack was undone with the transaction
    assert isinstance(members[1], sqlite3.IntegrityError), members[1]  # the effect's own error, as it is
    assert q.get("lead").state == "inflight" and q.get("member").state == "inflight"
    # The enqueue ran either before the rollback (undone: it raised) or after it, in the next group.
    assert (q.get("grouped") is None) == isinstance(members[0], fairq.StoreError), members[0]
    assert q.ack(lead_lease).state == "acked"  # the queue goes on
    q.close()
    check_invariants(tmp_path / "q.db")
