"""`fairq ui` and `fairq serve --read-only` as real processes: the console shortcut listens
on loopback with a fresh token it prints once, serves only the console and the endpoints it
uses, and refuses a missing file without creating it; a read-only server refuses actions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import fairq
from helpers import HANG, ROOT, start_serve


def call(url: str, token: str, method: str = "GET", body: dict | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(request, timeout=HANG) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def ui_process(db: Path, *args: str) -> subprocess.Popen:
    env = {k: x for k, x in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_TOKEN", "FAIRQ_URL")}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.Popen([sys.executable, "-m", "fairq", "ui", "--db", str(db), "--port", "0", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_fairq_ui_serves_the_console_on_loopback_with_a_printed_token_and_nothing_for_workers(tmp_path) -> None:
    db = tmp_path / "queue.db"
    with fairq.Queue(db) as q:
        q.enqueue("order-1", {"sku": "book"}, flow="tenant-a")
    proc = ui_process(db)
    try:
        listening, token_line = proc.stdout.readline(), proc.stdout.readline()
        assert listening.startswith(f"fairq: console for {db} at http://127.0.0.1:"), listening
        url = listening.rsplit(" at ", 1)[1].strip().removesuffix("/ui/")
        token = token_line.rsplit(": ", 1)[1].strip()
        assert len(token) >= 24
        assert call(url + "/ui/", "")[0] == 200
        assert call(url + "/v1/flows", "wrong")[0] == 401
        status, text = call(url + "/v1/flows", token)
        assert status == 200 and json.loads(text)["flows"][0]["name"] == "tenant-a"
        assert call(url + "/v1/claim", token, "POST", {})[0] == 404  # workers cannot claim through the console
        assert call(url + "/v1/set_weight", token, "POST", {"flow": "tenant-a", "weight": 4})[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=HANG)
    assert proc.returncode == 0
    with fairq.Queue(db) as q:
        assert [f.weight for f in q.flows()] == [4] and q.get("order-1").state is fairq.State.READY


def test_fairq_ui_read_only_refuses_actions(tmp_path) -> None:
    db = tmp_path / "queue.db"
    fairq.Queue(db).close()
    proc = ui_process(db, "--read-only")
    try:
        url = proc.stdout.readline().rsplit(" at ", 1)[1].strip().removesuffix("/ui/")
        token = proc.stdout.readline().rsplit(": ", 1)[1].strip()
        status, text = call(url + "/v1/set_weight", token, "POST", {"flow": "f", "weight": 2})
        assert status == 403 and json.loads(text)["error"] == "forbidden"
        assert json.loads(call(url + "/v1/info", token)[1])["read_only"] is True
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=HANG)
    assert "read-only" in err


def test_fairq_ui_refuses_a_missing_database_and_creates_nothing(tmp_path) -> None:
    proc = ui_process(tmp_path / "typo.db")
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 1 and "no fairq database" in err and "Traceback" not in err
    assert not (tmp_path / "typo.db").exists()


def test_fairq_serve_read_only_refuses_every_action_and_serves_reads(tmp_path) -> None:
    db = tmp_path / "queue.db"
    with fairq.Queue(db) as q:
        q.enqueue("order-1", {"sku": "book"})
    proc, url = start_serve(db, "--port", "0", "--read-only", env={"FAIRQ_TOKEN": "t0ken"})
    try:
        claim = call(url + "/v1/claim", "t0ken", "POST", {})
        events = call(url + "/v1/events", "t0ken")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=HANG)
    assert claim[0] == 403 and "read-only" in json.loads(claim[1])["message"]
    assert events[0] == 200 and json.loads(events[1])["events"][0]["event_id"] == "order-1"
    assert "read-only" in err
    with fairq.Queue(db) as q:
        assert q.get("order-1").state is fairq.State.READY and q.stats().totals["claimed"] == 0
