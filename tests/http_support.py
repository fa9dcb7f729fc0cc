"""A fairq HTTP server on a loopback port, raw requests to it, and `fairq serve` subprocesses."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq
from fairq.http.server import Server

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "t0ken-for-tests"


@contextlib.contextmanager
def running(queue: fairq.Queue, *, token: str | None = TOKEN, **kw: Any) -> Iterator[Server]:
    """A Server for `queue` on a free loopback port, serving on a thread."""
    server = Server(queue, token=token, port=0, **kw)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)  # the timeout only stops a hang


class Clock:
    """A server Queue's clock that tests move by hand: leases expire exactly, nothing sleeps."""

    def __init__(self, now: float = 1_764_432_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(make_queue, clock: Clock) -> Iterator[Server]:
    """A server whose Queue reads `clock`."""
    with running(make_queue(clock=clock)) as s:
        yield s


@pytest.fixture
def client(server: Server) -> fairq.Client:
    return fairq.Client(server.url, token=TOKEN, timeout=10)


class Answer:
    """A raw HTTP answer: status, headers, and a JSON body decoded (None if empty or not JSON)."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self.text = response.read().decode("utf-8")
        is_json = response.headers.get_content_type() == "application/json"
        self.json = json.loads(self.text) if self.text and is_json else None

    def __repr__(self) -> str:
        return f"<{self.status} {self.text}>"


def raw(server: Server, method: str, path: str, body: Any = None, *, token: str | None = TOKEN,
        headers: dict[str, str] | None = None, skip_length: bool = False) -> Answer:
    """One request with exactly these headers; `body` is JSON-encoded unless it is bytes."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)  # the timeout only stops a hang
    try:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        all_headers = {"Content-Type": "application/json"} if data is not None else {}
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        conn.putrequest(method, path, skip_host="Host" in all_headers, skip_accept_encoding=True)
        for name, value in all_headers.items():
            conn.putheader(name, value)
        if data is not None and not skip_length:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        return Answer(conn.getresponse())
    finally:
        conn.close()


def eventually(condition: Callable[[], Any], *, seconds: float = 60) -> Any:
    """Poll `condition` until it is true and return its value (false if the time
    runs out: the deadline only stops a hang, the caller asserts)."""
    deadline = time.monotonic() + seconds
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


def serve_command(db: Path, *args: str, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of `fairq --db DB serve ARGS` (no FAIRQ_DB, no FAIRQ_TOKEN
    unless `env` gives one)."""
    full_env = {k: x for k, x in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_TOKEN")}
    full_env.update({"PYTHONPATH": str(ROOT / "src")}, **(env or {}))
    return [sys.executable, "-m", "fairq", "--db", str(db), "serve", *args], full_env


def start_serve(db: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A `fairq serve` subprocess and the URL it printed."""
    command, full_env = serve_command(db, *args, env=env)
    proc = subprocess.Popen(command, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if " at http://" not in line:
        proc.kill()
        raise AssertionError(f"fairq serve did not start: {line!r} {proc.stderr.read()!r}")
    return proc, line.rsplit(" at ", 1)[1].strip()


def remote_drain(url: str, name: str, batch: bool, barrier: Any, results: Any) -> None:
    """A worker process on a Client: claim and ack until the queue stays idle; reports its claims."""
    client = fairq.Client(url, token=TOKEN, timeout=30)
    barrier.wait()
    claimed: list[tuple[str, int]] = []
    lost = 0
    idle = 0
    while idle < 3:
        leases = client.claim_many(4, owner=name, lease_seconds=60) if batch else \
            [lease for lease in [client.claim(owner=name, lease_seconds=60)] if lease is not None]
        if not leases:
            idle += 1
            time.sleep(0.05)
            continue
        idle = 0
        claimed += [(lease.event_id, lease.generation) for lease in leases]
        if batch:
            lost += sum(not isinstance(r, fairq.Settled) for r in client.settle_many([(x, "ack") for x in leases]))
        else:
            client.ack(leases[0])
    results.put((name, claimed, lost))


def remote_worker(url: str, marks: str, options: dict[str, Any], until_idle: bool, results: Any) -> None:
    """fairq.Worker over a Client in this (spawned) process, running work_handlers.slow; reports
    its counts. Without until_idle it runs until SIGTERM."""
    os.environ["FAIRQ_TEST_MARKS"] = marks
    import work_handlers

    client = fairq.Client(url, token=TOKEN, timeout=30)
    worker = fairq.Worker(client, work_handlers.slow, idle_max=0.05, **options)
    results.put(worker.run(until_idle=until_idle))
