"""fairq's own sessions are bounded: one frozen inside a transaction (SIGSTOP
here; a paused VM or a vanished host in production) is ended by the server
within idle_in_transaction_session_timeout, its row locks released, and when
it runs again its call fails as Unavailable with nothing committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import fairq
from helpers import ROOT
from pgcluster import require_psycopg

psycopg = require_psycopg()

SRC = str(ROOT / "src")
HANG = 60  # seconds; only to stop a hung test
BOUND = 3  # seconds: the frozen session's bound in the test below


def session_setting(url: str, name: str) -> str:
    """The value a Queue's own session has for a server setting (read in a settle effect)."""
    seen: list[str] = []
    with fairq.Queue(url) as q:
        q.enqueue(None, {})
        lease = q.claim()
        assert lease is not None
        q.ack(lease, effect=lambda conn: seen.append(conn.execute(f"SHOW {name}").fetchone()[0]))
    return seen[0]


def test_a_queue_session_is_bounded_by_default_and_keeps_what_the_url_or_the_server_sets(pg_url: str) -> None:
    assert session_setting(pg_url, "idle_in_transaction_session_timeout") == "1min"
    assert session_setting(pg_url, "tcp_keepalives_idle") == "30"
    own = pg_url.replace("options=", "options=-c%20idle_in_transaction_session_timeout%3D7s%20")
    assert session_setting(own, "idle_in_transaction_session_timeout") == "7s"  # the URL's options=-c
    assert session_setting(f"{pg_url}&fairq_idle_in_transaction_timeout=2.5",
                           "idle_in_transaction_session_timeout") == "2500ms"
    assert session_setting(f"{pg_url}&fairq_idle_in_transaction_timeout=off",
                           "idle_in_transaction_session_timeout") == "0"  # the server's default: none


@pytest.mark.parametrize("value", ["0", "-1", "abc", "", "1e12"])
def test_a_bad_idle_bound_is_refused_naming_it(pg_url: str, value: str) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(f"{pg_url}&fairq_idle_in_transaction_timeout={value}")
    assert info.value.field == "fairq_idle_in_transaction_timeout"


FROZEN = textwrap.dedent("""
    import os, signal, sys
    import fairq
    url = sys.argv[1]
    def effect(conn):
        conn.execute("INSERT INTO effects VALUES (1)")
        print(conn.execute("SELECT pg_backend_pid()").fetchone()[0], flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)   # frozen inside the settle's transaction
    with fairq.Queue(url) as q:
        lease = q.claim()
        try:
            q.ack(lease, effect=effect)
            print("committed", flush=True)
        except fairq.FairqError as exc:
            print(type(exc).__name__, exc, flush=True)
""")


def test_a_process_frozen_inside_a_settle_is_ended_by_the_server_and_its_locks_released(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE effects (n integer)")
    with fairq.Queue(pg_url) as q:
        q.enqueue("e", {}, flow="F")
    bounded = f"{pg_url}&fairq_idle_in_transaction_timeout={BOUND}"
    child = subprocess.Popen([sys.executable, "-c", FROZEN, bounded], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline())
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            idle_since, gone_at = None, None
            deadline = time.monotonic() + HANG
            while time.monotonic() < deadline:
                row = watcher.execute(
                    "SELECT state, extract(epoch FROM now() - state_change) FROM pg_stat_activity "
                    "WHERE pid = %s", (pid,)).fetchone()
                if row is None:
                    gone_at = time.monotonic()
                    break
                if row[0] == "idle in transaction" and idle_since is None:
                    idle_since = time.monotonic() - float(row[1])
                    if float(row[1]) < BOUND - 1:  # still well inside the bound: its locks are held
                        with pytest.raises(psycopg.errors.LockNotAvailable), watcher.transaction():
                            watcher.execute("SELECT 1 FROM flow WHERE name = 'F' FOR UPDATE NOWAIT")
                time.sleep(0.05)
            assert idle_since is not None and gone_at is not None, "the frozen session outlived the test"
            lasted = gone_at - idle_since
            print(f"frozen session ended {lasted:.2f} s after it went idle (bound {BOUND} s)")
            assert BOUND - 0.5 <= lasted <= BOUND + 30  # the upper margin only absorbs a loaded machine
            with watcher.transaction():  # its row locks went with it
                watcher.execute("SELECT 1 FROM flow WHERE name = 'F' FOR UPDATE NOWAIT")
                watcher.execute("SELECT 1 FROM event WHERE event_id = 'e' FOR UPDATE NOWAIT")
                watcher.execute("SELECT 1 FROM head FOR UPDATE NOWAIT")
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=HANG)
        assert out.startswith("Unavailable"), (out, err)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait()
    with fairq.Queue(pg_url) as q:
        assert q.get("e").state is fairq.State.INFLIGHT  # the ack did not commit; the lease ends by itself
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 0  # nor did the effect
