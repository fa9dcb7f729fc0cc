"""Pause one of the one-statement functions (migrations/verbs.sql) at a chosen line, in
one session, so a test can run other sessions at that exact point.

pause_at() installs, in the test's own schema, the function as the shipped
migration defines it with one line added after `anchor`: a session whose
application_name is PAUSED waits there for an advisory lock the test holds
(held()). Every other session runs the function unchanged in effect. The
test sees the pause as that session waiting for a lock (pgsessions)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from importlib import resources

from pgcluster import require_psycopg
from pgsessions import HANG, waiting_for_a_lock

psycopg = require_psycopg()

PAUSED = "paused"
_KEY = 804_2026

# Waits for the test's advisory lock, in the paused session only.
_PAUSE = f"""
CREATE OR REPLACE FUNCTION fairq_test_pause() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = '{PAUSED}' THEN
        PERFORM pg_advisory_xact_lock({_KEY});
    END IF;
END
$$;
"""


def shipped(function: str) -> str:
    """The CREATE statement of `function` as the migrations ship it."""
    head = f"CREATE OR REPLACE FUNCTION {function}("
    files = ("migrations/verbs.sql", "migrations/operators.sql")
    text = next(t for t in (resources.files("fairq.stores.postgres").joinpath(f).read_text() for f in files)
                if head in t)
    start = text.index(head)
    return text[start:text.index("\n$$;", start) + 4]


def pause_at(url: str, function: str, anchor: str) -> None:
    """Install `function` pausing after the line `anchor` (which must occur once)."""
    body = shipped(function)
    assert body.count(anchor) == 1, f"{anchor!r} is not one line of {function}"
    paused = body.replace(anchor, anchor + "\n    PERFORM fairq_test_pause();")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_PAUSE)
        conn.execute(paused)


@contextlib.contextmanager
def held(url: str) -> Iterator[None]:
    """The lock a paused session waits for, held until the block ends."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_KEY,))


def wait_paused(url: str) -> None:
    """Until the paused session waits at its line."""
    deadline = time.monotonic() + HANG
    while not waiting_for_a_lock(url, PAUSED):
        assert time.monotonic() < deadline, "the paused session never reached its line"
        time.sleep(0.01)


def with_name(url: str, application_name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={application_name}"
