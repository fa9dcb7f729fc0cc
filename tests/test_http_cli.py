"""The fairq command against a remote server (--url or FAIRQ_URL, token from FAIRQ_TOKEN),
fairq.Client from the environment, and the curl lines in docs/http.md run against a real
server on a loopback port."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import fairq
from helpers import ROOT, TOKEN, cli, running

HANG = 60  # seconds: only stops a hang


@pytest.fixture
def served(tmp_path):
    """The server `fairq serve` runs, on a thread of this process, on a fresh file: (url, path).
    (`fairq serve` as a real process is tested in test_http_serve.py.)"""
    (tmp_path / "server").mkdir()
    path = tmp_path / "server" / "served.db"  # away from the commands' working directory
    with fairq.Queue(path) as queue, running(queue) as server:
        yield server.url, path


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`fairq ARGS` in this process, with FAIRQ_TOKEN set and no FAIRQ_DB / FAIRQ_URL unless `env`
    gives them."""
    return cli(*args, cwd=cwd, env={"FAIRQ_TOKEN": TOKEN, **(env or {})},
               unset=("FAIRQ_DB", "FAIRQ_URL", "FAIRQ_TOKEN"))


def fairq_process(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The same in a real `python -m fairq` process."""
    full_env = {k: x for k, x in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_URL", "FAIRQ_TOKEN")}
    full_env.update({"PYTHONPATH": str(ROOT / "src"), "FAIRQ_TOKEN": TOKEN}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "fairq", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=HANG)


def test_inspection_and_operator_commands_run_against_a_server(served, tmp_path) -> None:
    url, _ = served
    client = fairq.Client(url, token=TOKEN)
    client.enqueue("a", {"n": 1}, flow="f")
    client.enqueue("b", {"n": 2}, flow="f")
    client.fail(client.claim(owner="w"), reason="broken")
    status = run("--url", url, "status", "--json", cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["counts"]["quarantined"] == 1
    listed = run("events", "--flow", "f", "--json", cwd=tmp_path, env={"FAIRQ_URL": url})  # from the environment
    assert listed.returncode == 0 and [e["event_id"] for e in json.loads(listed.stdout)] == ["a", "b"]
    shown = run("--url", url, "show", "a", "--json", cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["audit"][0]["reason"] == "broken"
    explained = run("--url", url, "explain", "f", "--json", cwd=tmp_path)
    answer = json.loads(explained.stdout)
    assert answer["why"] == "quarantined" and answer["redrive"].startswith(f"fairq --url {url} redrive a ")
    redrive = shlex.split(answer["redrive"].replace("<why it is safe to run again>", "fixed"))[1:]
    redriven = run(*redrive, cwd=tmp_path)  # the command explain printed, as printed
    assert redriven.returncode == 0 and json.loads(redriven.stdout) == {"event_id": "a", "generation": 2}
    metrics = run("--url", url, "metrics", cwd=tmp_path)
    assert metrics.returncode == 0 and 'fairq_events{state="ready"} 2' in metrics.stdout
    assert not list(tmp_path.glob("fairq.db*"))  # nothing local was opened or created


def test_fairq_work_drains_a_server(served, tmp_path) -> None:
    url, _ = served
    (tmp_path / "handlers.py").write_text("def handle(job):\n    pass\n")
    client = fairq.Client(url, token=TOKEN)
    client.enqueue_many([(f"e{i}", {"i": i}, f"f{i % 3}") for i in range(12)])
    done = fairq_process("--url", url, "work", "handlers:handle", "--until-idle", "--concurrency", "2",
                         cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert client.stats().counts["acked"] == 12
    assert not (tmp_path / "fairq.db").exists()


def test_url_and_db_together_and_local_only_commands_are_usage_errors(served, tmp_path) -> None:
    url, _ = served
    both = run("--url", url, "--db", str(tmp_path / "x.db"), "status", cwd=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr and "Traceback" not in both.stderr
    (tmp_path / "events.jsonl").write_text('{"event_id": "a", "body": 1}\n')
    for args in (["enqueue", "events.jsonl"], ["purge", "--older-than", "1d"], ["tick"], ["init"]):
        refused = run("--url", url, *args, cwd=tmp_path)
        assert refused.returncode == 2 and "does not run against a server" in refused.stderr, args
        assert "Traceback" not in refused.stderr
        from_env = run(*args, cwd=tmp_path, env={"FAIRQ_URL": url})
        assert from_env.returncode == 2 and "unset FAIRQ_URL" in from_env.stderr, args
    assert not list(tmp_path.glob("*.db"))
    assert fairq.Client(url, token=TOKEN).events() == []


def test_a_command_without_a_token_says_how_to_give_one(served, tmp_path) -> None:
    url, _ = served
    done = run("--url", url, "status", cwd=tmp_path, env={"FAIRQ_TOKEN": ""})
    assert done.returncode == 1 and "set FAIRQ_TOKEN" in done.stderr and "Traceback" not in done.stderr


def test_a_client_reads_its_url_and_token_from_the_environment(served, monkeypatch) -> None:
    url, _ = served
    monkeypatch.setenv("FAIRQ_URL", url)
    monkeypatch.setenv("FAIRQ_TOKEN", TOKEN)
    assert fairq.Client().enqueue("a", 1).created
    monkeypatch.delenv("FAIRQ_TOKEN")
    with pytest.raises(fairq.RemoteError) as caught:
        fairq.Client().stats()
    assert caught.value.status == 401 and "set FAIRQ_TOKEN" in str(caught.value) and "token=" in str(caught.value)
    monkeypatch.delenv("FAIRQ_URL")
    with pytest.raises(fairq.InvalidInput) as missing:
        fairq.Client()
    assert missing.value.field == "url" and "FAIRQ_URL" in str(missing.value)


def test_a_remote_why_blocked_answers_what_the_local_queue_answers(served) -> None:
    url, path = served
    client = fairq.Client(url, token=TOKEN)
    client.enqueue("a", 1, flow="f")
    lease = client.claim(owner="w")
    remote = client.why_blocked("f")
    with fairq.Queue(path) as local:
        assert remote == fairq.Queue.why_blocked(local, "f", now=remote.now)
    assert (remote.why, remote.owner, remote.until) == ("leased", "w", lease.lease_until)
    assert client.why_blocked("nope").why == "unknown"


def curl_lines() -> list[str]:
    """Every `curl` command in docs/http.md's curl section, continuation lines joined."""
    doc = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")
    section = doc.split("## With curl\n")[1].split("\n## ")[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    joined = "\n".join(blocks).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("curl ")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_curl_lines_in_the_docs_run_against_a_real_server(served, tmp_path) -> None:
    url, _ = served
    lines = curl_lines()
    assert len(lines) >= 5
    env = {**os.environ, "FAIRQ_URL": url, "FAIRQ_TOKEN": TOKEN}
    answers = []
    for line in lines:
        done = subprocess.run(["sh", "-c", line], env=env, capture_output=True, text=True, timeout=HANG, cwd=tmp_path)
        assert done.returncode == 0, (line, done.stderr)
        answers.append(done.stdout)
    assert all(not a or a.lstrip().startswith(("{", "#")) for a in answers), answers
    client = fairq.Client(url, token=TOKEN)
    assert client.stats().totals["enqueued"] >= 1 and client.stats().totals["acked"] >= 1


def test_a_curl_line_without_curl_still_parses_into_a_request(served) -> None:
    """Independent of curl being installed: the documented enqueue line, replayed with urllib."""
    url, _ = served
    enqueue = next(line for line in curl_lines() if '/v1/enqueue"' in line)
    words = shlex.split(enqueue)
    headers = dict(h.split(": ", 1) for h in (words[i + 1] for i, w in enumerate(words) if w == "-H"))
    headers = {k: x.replace("$FAIRQ_TOKEN", TOKEN) for k, x in headers.items()}
    body = words[words.index("-d") + 1].encode()
    target = next(w for w in words if w.startswith("$FAIRQ_URL")).replace("$FAIRQ_URL", url)
    request = urllib.request.Request(target, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=HANG) as answer:
        assert answer.status == 201 and json.loads(answer.read())["created"] is True
