"""What a callback or an interruption cannot do to a group of calls.

A settle effect that closes fairq's connection or removes its authorizer is
refused, and the queue goes on. A caller interrupted (a Ctrl-C) while it
waits for the connection, or for its group's COMMIT, gets the interruption:
the other calls are neither held up nor failed by it, and nobody is told
something the file does not show. The interruptions are injected (a wait
that raises KeyboardInterrupt), so each test takes one exact path.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

import fairq
from fairq.stores.sqlite import group as group_module
from helpers import check_invariants, eventually


def writers(q: fairq.Queue) -> Any:
    return q._store.db.writers  # type: ignore[attr-defined]


def in_thread(call: Any, out: dict[str, Any], key: str) -> threading.Thread:
    def run() -> None:
        try:
            out[key] = call()
        except BaseException as exc:
            out[key] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_effect_cannot_close_fairqs_connection(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = fairq.Queue(path)
    q.enqueue("a", {})
    lease = q.claim()
    with pytest.raises(fairq.UsageError, match="cannot close fairq's connection"):
        q.ack(lease, effect=lambda conn: conn.close())
    assert q.get("a").state == "inflight"
    other = fairq.Queue(path, busy_timeout=5)  # the file's write lock was let go
    assert other.enqueue("b", {}).created
    other.close()
    assert q.ack(lease).state == "acked"  # and this queue goes on
    q.close()
    check_invariants(path)


def test_an_effect_cannot_remove_the_authorizer_that_keeps_the_transaction_open(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = fairq.Queue(path)
    q.enqueue("a", {})
    lease = q.claim()

    def unguard(conn: sqlite3.Connection) -> None:
        conn.set_authorizer(None)

    with pytest.raises(fairq.UsageError, match="cannot replace the authorizer"):
        q.ack(lease, effect=unguard)

    def commit(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE app (x)")
        conn.execute("COMMIT")

    with pytest.raises(fairq.UsageError, match="tried to end the transaction it runs in"):
        q.ack(lease, effect=commit)  # still refused: the guard stayed
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'app'").fetchone()[0] == 0
    conn.close()
    q.close()


@pytest.mark.parametrize("when", ["before its group commits", "after its group committed"])
def test_a_caller_interrupted_while_its_group_commits_neither_fails_the_group_nor_is_told_a_falsehood(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    class InterruptedOnce(threading.Event):
        fired = False

        def wait(self, timeout: float | None = None) -> bool:
            if not InterruptedOnce.fired:
                InterruptedOnce.fired = True
                if when == "after its group committed":
                    time.sleep(0.3)  # the member commits the group meanwhile
                raise KeyboardInterrupt
            return super().wait(timeout)

    monkeypatch.setattr(group_module, "threading", types.SimpleNamespace(
        Event=InterruptedOnce, Condition=threading.Condition, Lock=threading.Lock,
        get_ident=threading.get_ident))
    path = tmp_path / "q.db"
    q = fairq.Queue(path)
    q.enqueue("a", {})
    lease = q.claim()
    out: dict[str, Any] = {}
    # The leader holds the connection until the member waits for it, then hands
    # it over and waits for the group's COMMIT: that wait is interrupted.
    leader = in_thread(lambda: q.ack(lease, effect=lambda conn: time.sleep(0.2)), out, "leader")
    assert eventually(lambda: writers(q).group is not None)
    member = in_thread(lambda: q.enqueue("m", {}), out, "member")
    leader.join(30)
    member.join(30)
    assert isinstance(out["leader"], KeyboardInterrupt), out["leader"]
    assert out["member"].created  # the group was not failed by the interruption
    assert q.get("a").state == "acked" and q.get("m").state == "ready"  # one COMMIT held both
    assert writers(q).waiting == 0
    q.close()
    check_invariants(path)


def test_a_caller_interrupted_while_it_waits_for_the_connection_holds_up_no_group(
        tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = fairq.Queue(path)
    w = writers(q)
    real = w.conn_lock

    class InterruptedWait:
        fired = False

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            if blocking and real.locked() and not InterruptedWait.fired:
                InterruptedWait.fired = True
                raise KeyboardInterrupt
            return real.acquire(blocking, timeout)

        def release(self) -> None:
            real.release()

        def locked(self) -> bool:
            return real.locked()

    w.conn_lock = InterruptedWait()
    q.enqueue("a", {})
    lease = q.claim()
    out: dict[str, Any] = {}
    leader = in_thread(lambda: q.ack(lease, effect=lambda conn: time.sleep(0.3)), out, "leader")
    assert eventually(lambda: w.group is not None)
    with pytest.raises(KeyboardInterrupt):
        q.enqueue("b", {})
    assert w.waiting == 0
    leader.join(30)
    assert out["leader"].state == "acked"  # its group ended, not waiting for the interrupted call
    later = in_thread(lambda: q.enqueue("c", {}), out, "later")
    later.join(10)
    assert out["later"].created and q.get("b") is None
    q.close()
    check_invariants(path)

