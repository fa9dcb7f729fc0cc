"""Opening a PostgreSQL queue: the migration ladder (idempotent, safe under
concurrent opens), read-only opens, the missing driver, failures typed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import fairq
from fairq.stores.postgres.schema import LATEST
from helpers import ROOT
from pgcluster import require_psycopg
from pgold import back_to

psycopg = require_psycopg()

SRC = str(ROOT / "src")


def tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")]


def test_opening_again_applies_no_step_twice(pg_url: str) -> None:
    for _ in range(3):
        with fairq.Queue(pg_url) as q:
            q.enqueue(None, {})
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT array_agg(version ORDER BY version) FROM fairq_schema").fetchone()[0] \
            == list(range(1, LATEST + 1))
    with fairq.Queue(pg_url) as q:
        assert q.stats().totals["enqueued"] == 3


def test_a_version_1_queue_is_upgraded_on_open_with_its_misfire_records_listed(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.schedules.add("beat", every=60, start=0, misfire="skip", grace=0)
        q.tick(now=600)
    back_to(pg_url, 1)  # as a fairq from before step 2 left it
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('audit_misfire') IS NULL").fetchone()[0]
    with fairq.Queue(pg_url, clock="model") as q:
        assert q.schema_version == LATEST >= 2
        misfired = [a for a in q.audit() if a.action == "misfire"]
        assert misfired and q.schedules.misfires("beat", limit=100) == misfired[::-1]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('audit_misfire') IS NOT NULL").fetchone()[0]


def test_schema_version_is_the_newest_step_applied_also_when_opened_read_only(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        assert q.schema_version == LATEST >= 2
    with fairq.Queue(pg_url, readonly=True) as q:
        assert q.schema_version == LATEST


CREATOR = textwrap.dedent("""
    import json, sys, time
    import fairq
    url, n, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    time.sleep(max(0.0, start - time.time()))   # all start together
    try:
        fairq.Queue(url, max_attempts=n).close()
        print(json.dumps({"opened": n}))
    except fairq.PolicyMismatch as exc:
        print(json.dumps({"refused": n, "stored": exc.stored}))
""")


def test_processes_racing_to_create_one_queue_create_it_once(pg_url: str) -> None:
    start = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, "-c", CREATOR, pg_url, str(n), str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": SRC}) for n in range(1, 7)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)  # only stops a hang
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    (winner,) = [a["opened"] for a in answers if "opened" in a]
    assert all(a["stored"] == winner for a in answers if "refused" in a)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM fairq_schema").fetchone()[0] == LATEST


def test_a_read_only_open_never_creates_and_never_writes(pg_url: str) -> None:
    with pytest.raises(fairq.SchemaError, match="no fairq queue"):
        fairq.Queue(pg_url, readonly=True)
    assert tables(pg_url) == []
    with fairq.Queue(pg_url) as q:
        q.enqueue("e", {})
    with fairq.Queue(pg_url, readonly=True) as reader:
        assert reader.get("e").state is fairq.State.READY
        with pytest.raises(fairq.ReadOnly):
            reader.enqueue("f", {})
        assert reader.get("f") is None


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    fairq.Queue(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("INSERT INTO fairq_schema (version) VALUES (%s)", (LATEST + 1,))
    with pytest.raises(fairq.SchemaError, match="newer"):
        fairq.Queue(pg_url)


MISSING_DRIVER = textwrap.dedent("""
    import sys
    sys.modules["psycopg"] = None   # as if psycopg were not installed
    import fairq
    with fairq.Queue(sys.argv[2]) as q:   # SQLite needs nothing more
        q.enqueue("e", {})
    try:
        fairq.Queue(sys.argv[1])
    except fairq.FairqError as exc:
        print(type(exc).__name__, exc)
""")


def test_without_psycopg_sqlite_works_and_a_url_names_the_extra_to_install(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-c", MISSING_DRIVER, "postgresql://nobody@127.0.0.1:1/x",
                           str(tmp_path / "q.db")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("UsageError") and "pip install 'fairq[postgres]'" in done.stdout


def test_an_unreachable_server_is_unavailable_not_a_driver_error() -> None:
    with pytest.raises(fairq.Unavailable) as info:
        fairq.Queue("postgresql://nobody@127.0.0.1:1/nowhere?connect_timeout=2")
    assert isinstance(info.value.__cause__, psycopg.Error)


def test_a_connection_lost_under_a_queue_is_unavailable_and_nothing_half_done(pg_url: str) -> None:
    victim = f"fairq-victim-{uuid.uuid4().hex[:8]}"  # only this queue's connection is cut
    with fairq.Queue(f"{pg_url}&application_name={victim}") as q:
        q.enqueue("e", {})
        with psycopg.connect(pg_url, autocommit=True) as admin:
            cut = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE application_name = %s", (victim,)).fetchone()[0]
        assert cut == 1
        with pytest.raises(fairq.Unavailable) as info:
            q.claim()
        assert isinstance(info.value.__cause__, psycopg.Error)
    with fairq.Queue(pg_url) as again:
        assert again.get("e").state is fairq.State.READY


def test_an_upgrade_applies_the_functions_again_after_its_steps(pg_url: str) -> None:
    # The server-side functions are not steps: an open that upgrades the schema
    # replaces them with this fairq's definitions, whatever the old ones were.
    with fairq.Queue(pg_url) as q:
        q.enqueue("a", {})
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER FUNCTION fairq_claim RESET ALL")  # as the functions of a version before 6
        conn.execute("DELETE FROM fairq_schema WHERE version = %s", (LATEST,))
    with fairq.Queue(pg_url) as q:
        assert q.schema_version == LATEST
        assert q.claim() is not None
    with psycopg.connect(pg_url, autocommit=True) as conn:
        config = conn.execute("SELECT proconfig FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace "
                              "WHERE n.nspname = current_schema() AND p.proname = 'fairq_claim'").fetchone()[0]
        assert config == ["plan_cache_mode=force_generic_plan"]
