"""PostgreSQL server sessions seen from a test, by their application name:
whether one waits for a lock, ending them, and two threads interleaved at a
lock (the first paused by a hook, the second run until it waits on the
first's locks, then the first let go)."""

from __future__ import annotations

import threading
import time

from pgcluster import require_psycopg

psycopg = require_psycopg()  # without it, a test module importing this one is skipped
HANG = 60  # seconds; only to stop a hung test


def waiting_for_a_lock(url: str, application_name: str) -> bool:
    """Whether a session of `application_name` waits for a lock now."""
    with psycopg.connect(url, autocommit=True) as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                                 "AND wait_event_type = 'Lock'", (application_name,)).fetchone()[0])


def cut(admin_url: str, application_name: str) -> int:
    """Terminate the server sessions of one application name; how many there were."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        return int(admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                 "WHERE application_name = %s", (application_name,)).fetchone()[0])


def interleave(first: threading.Thread, second: threading.Thread, *, paused: threading.Event,
               go: threading.Event, url: str, second_session: str) -> None:
    """Start `first` and wait until its hook sets `paused`; start `second`
    and wait until its session (`second_session`) waits for a lock or it has
    finished; then set `go` so that `first` goes on, and join both."""
    first.start()
    assert paused.wait(HANG)
    second.start()
    deadline = time.monotonic() + HANG
    while second.is_alive() and not waiting_for_a_lock(url, second_session) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.set()
    first.join(HANG)
    second.join(HANG)
