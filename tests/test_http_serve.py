"""`fairq serve`: refusing to start unsafely (checked in this process), and as a real process
stopping cleanly, serving remote workers in other processes, and a kill mid-run with nothing
lost."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import fairq
from helpers import TOKEN, cli, eventually, remote_drain, start_serve

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def refused_serve(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`fairq --db DB serve ARGS` in this process, without FAIRQ_DB or FAIRQ_TOKEN unless `env` gives
    one: for refusals, which happen before anything is served (a hung call fails, not hangs)."""
    return cli("--db", str(db), "serve", *args, cwd=db.parent, env=env, unset=("FAIRQ_DB", "FAIRQ_TOKEN"))


def refused_start(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return refused_serve(tmp_path / "q.db", "--port", "0", *args)


def test_serve_refuses_to_start_without_a_token(tmp_path) -> None:
    done = refused_start(tmp_path)
    assert done.returncode == 1 and "FAIRQ_TOKEN" in done.stderr and done.stdout == ""
    (tmp_path / "empty").write_text("\n")
    done = refused_start(tmp_path, "--token-file", str(tmp_path / "empty"))
    assert done.returncode == 1 and "no token" in done.stderr
    done = refused_start(tmp_path, "--token-file", str(tmp_path / "missing"))
    assert done.returncode == 1 and "cannot read the token file" in done.stderr


def test_serve_refuses_no_auth_on_an_address_that_is_not_loopback(tmp_path) -> None:
    done = refused_start(tmp_path, "--no-auth", "--host", "0.0.0.0")
    assert done.returncode == 1 and "loopback" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_url_and_stops_cleanly_on_a_signal(tmp_path, signum) -> None:
    proc, url = start_serve(tmp_path / "q.db", "--port", "0", "--max-request-bytes", "300", env={"FAIRQ_TOKEN": TOKEN})
    try:
        assert urlsplit(url).hostname == "127.0.0.1"
        client = fairq.Client(url, token=TOKEN, timeout=10)
        assert client.enqueue("a", {"n": 1}).created
        with pytest.raises(fairq.InvalidInput):
            client.enqueue("b", "x" * 400)  # over --max-request-bytes
    finally:
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)  # the timeout only stops a hang
    assert proc.returncode == 0 and "stopped" in err and "Traceback" not in err
    with fairq.Queue(tmp_path / "q.db") as q:
        assert [e.event_id for e in q.events()] == ["a"]


def test_two_remote_worker_processes_drain_a_backlog_without_duplicate_claims(tmp_path, token_file) -> None:
    db = tmp_path / "q.db"
    proc, url = start_serve(db, "--port", "0", "--token-file", str(token_file))
    try:
        ids = [f"e{i}" for i in range(200)]
        fairq.Client(url, token=TOKEN).enqueue_many([(x, {"i": i}, f"flow-{i % 8}") for i, x in enumerate(ids)])
        barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
        workers = [SPAWN.Process(target=remote_drain, args=(url, f"w{n}", n == 1, barrier, results))
                   for n in range(2)]
        for w in workers:
            w.start()
        reports = [results.get(timeout=60) for _ in workers]  # the timeout only stops a hang
        for w in workers:
            w.join(timeout=30)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    claims = Counter(event_id for _, claimed, _ in reports for event_id, _ in claimed)
    assert sorted(claims) == sorted(ids) and set(claims.values()) == {1}
    assert all(lost == 0 for _, _, lost in reports)
    with fairq.Queue(db) as q:
        assert q.stats().counts == {"ready": 0, "inflight": 0, "acked": 200, "quarantined": 0, "discarded": 0}


def test_a_server_killed_mid_run_restarts_on_its_port_with_nothing_lost(tmp_path, token_file) -> None:
    db = tmp_path / "q.db"
    proc, url = start_serve(db, "--port", "0", "--token-file", str(token_file))
    client = fairq.Client(url, token=TOKEN, timeout=10)
    ids = [f"e{i}" for i in range(150)]  # killed after 50 acks: 100 are left for the restarted server
    client.enqueue_many([(x, {"i": i}, f"flow-{i % 5}") for i, x in enumerate(ids)])
    acked: list[str] = []
    outages: list[str] = []
    stop = threading.Event()

    def work() -> None:
        # A worker loop that knows only Client: it waits out outages and lets
        # leases it could not settle expire (they are claimed again).
        while not stop.is_set():
            try:
                lease = client.claim(owner="remote", lease_seconds=1)
                if lease is None:
                    time.sleep(0.02)
                    continue
                client.ack(lease)
                acked.append(lease.event_id)
            except fairq.LeaseLost:
                continue
            except fairq.Unavailable as exc:
                outages.append(str(exc))
                time.sleep(0.05)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        assert eventually(lambda: len(acked) >= 50)
        proc.kill()
        proc.wait(timeout=30)  # the timeout only stops a hang
        killed_at = len(acked)
        assert eventually(lambda: outages), "the worker never noticed the server was gone"
        proc, url_again = start_serve(db, "--port", str(urlsplit(url).port), "--token-file", str(token_file))
        assert url_again == url
        assert eventually(lambda: client.stats().counts["acked"] == len(ids))
    finally:
        stop.set()
        worker.join(timeout=30)
        proc.terminate()
        proc.communicate(timeout=30)
    assert 50 <= killed_at < len(ids)
    assert len(acked) == len(set(acked))  # no event was acked twice
    with fairq.Queue(db) as q:
        assert q.stats().counts == {"ready": 0, "inflight": 0, "acked": len(ids), "quarantined": 0, "discarded": 0}
        assert sorted(e.event_id for e in q.events(state="acked", limit=1000)) == sorted(ids)


@pytest.mark.parametrize("args", [("--port", "99999"), ("--port", "-1"), ("--port", "http")])
def test_serve_refuses_a_bad_port_as_a_usage_error_without_creating_the_database(tmp_path, args) -> None:
    done = refused_serve(tmp_path / "x.db", *args, env={"FAIRQ_TOKEN": TOKEN})
    assert done.returncode == 2 and "argument --port" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("args", [("--host", "0.0.0.0", "--no-auth"), ("--max-connections", "0"),
                                  ("--head-timeout", "0"), ("--send-timeout", "0"),
                                  ("--drain-seconds", "-1")])
def test_a_refused_serve_creates_no_database(tmp_path, args) -> None:
    done = refused_serve(tmp_path / "x.db", "--port", "0", *args, env={"FAIRQ_TOKEN": TOKEN})
    assert done.returncode == 1 and done.stderr.startswith("fairq: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()
