"""`fairq work MODULE:FUNCTION` with an async def handler runs it on fairq.aio.AsyncWorker
(in a real `fairq work` process); options that make no sense for it are usage errors."""

from __future__ import annotations

import fairq
from helpers import HANG, SUPPORT, cli, counts, start


def test_work_runs_an_async_handler_with_the_async_worker(tmp_path) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        q.enqueue_many([(f"e{i}", {}, f"F{i % 3}") for i in range(6)] + [("bad", {"fail": True})])
    proc = start(db, "work_handlers:async_handle", "--concurrency", "4", "--until-idle")
    _, err = proc.communicate(timeout=HANG)  # the timeout only stops a hang
    assert proc.returncode == 0, err
    assert "async=True" in err and "handled e0 asynchronously" in err
    assert "fairq work: claimed 7, acked 6, retried 0, released 0, quarantined 1" in err
    after = counts(db)
    assert after["acked"] == 6 and after["quarantined"] == 1


def test_processes_with_an_async_handler_is_a_usage_error_and_claims_nothing(tmp_path) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        q.enqueue("a", {})
    done = cli("--db", str(db), "work", "work_handlers:async_handle", "--processes", "--until-idle", cwd=SUPPORT)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--processes" in done.stderr and "async function" in done.stderr
    assert counts(db)["ready"] == 1
