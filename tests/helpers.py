"""Helpers the test modules share: the invariant recount, draining, the relay receiver, a fairq
HTTP server on a loopback port with raw requests to it, `fairq serve`/`fairq work`/`fairq`
child processes, SQLite-level tools (raw rows, injected failures, a version 1 file) and a
metrics exposition parser.

Test modules import from here (`from helpers import ...`), never from each other. Scripts and
functions that run in child processes live in tests/support/.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import fairq
from fairq.http.server import Server
from fairq.stores.sqlite import schema as migrate

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "tests" / "support"  # modules and scripts that child processes run


def load_file(path: Path, name: str) -> ModuleType:
    """The Python file at `path` (an example, a docs script) imported as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_check(script: Path) -> subprocess.CompletedProcess[str]:
    """`python SCRIPT --check` against this checkout's fairq; asserts it exited 0."""
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True,
                          timeout=120,  # the timeout only stops a hang
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stdout + done.stderr
    return done
FIXTURES = ROOT / "tests" / "fixtures"
HANG = 60  # seconds; only to stop a hung test
TABLES = ("queue_state", "flow", "event", "audit")  # the queue's tables that every verb may write

# Small settings that make retries and quarantine quick to reach: 3 claims per round, backoff 2 then 4 (cap 8), no jitter,
# a lease of 5 logical seconds.
SHORT_BACKOFF = fairq.Backoff(base=2.0, factor=2.0, cap=8.0, jitter=False)
SHORT_SETTINGS = {"lease_seconds": 5, "max_attempts": 3, "backoff": SHORT_BACKOFF}


def check_invariants(path: Path) -> None:
    """The incrementally kept dispatch state equals what a full recount derives."""
    if not path.exists():
        return
    conn = sqlite3.connect(path)
    try:
        now = conn.execute("SELECT now_ms FROM queue_state").fetchone()[0]
        # Within a flow, acks happen in seq order: a flow's head is its lowest
        # seq neither acked nor discarded; before it every event is acked or
        # discarded (purge may have removed some: their tombstones sit below
        # the head), behind it every event is stored, ready or discarded, up
        # to next_seq.
        final = ("acked", "discarded")
        columns = {r[1] for r in conn.execute("PRAGMA table_info(flow)")}
        paused_col = "paused" if "paused" in columns else "0"
        paused_flows = set()
        for flow_id, next_seq, paused in conn.execute(f"SELECT flow_id, next_seq, {paused_col} FROM flow"):
            rows = conn.execute("SELECT seq, state FROM event WHERE flow_id = ? ORDER BY seq", (flow_id,)).fetchall()
            seqs, states = [r[0] for r in rows], [r[1] for r in rows]
            assert all(1 <= seq < next_seq for seq in seqs), f"flow {flow_id}: seqs {seqs}, next {next_seq}"
            head_at = next((i for i, st in enumerate(states) if st not in final), len(states))
            head_seq = seqs[head_at] if head_at < len(seqs) else next_seq
            assert seqs[head_at:] == list(range(head_seq, next_seq)), f"flow {flow_id}: seqs {seqs}, next {next_seq}"
            assert all(st in ("ready", "discarded") for st in states[head_at + 1:]), f"flow {flow_id}: {states}"
            purged = [r[0] for r in conn.execute("SELECT seq FROM tombstone WHERE flow_id = ?", (flow_id,))]
            assert all(seq < head_seq for seq in purged), f"flow {flow_id}: tombstones {purged}"
            if paused:
                paused_flows.add(flow_id)
        # Exactly the heads (lowest seq of each flow neither acked nor
        # discarded; every such unordered event) carry a rotation place.
        heads = {r[0] for r in conn.execute(
            "SELECT e.id FROM event e WHERE e.state != 'acked' AND e.state != 'discarded' AND (e.flow_id IS NULL "
            "OR NOT EXISTS (SELECT 1 FROM event p WHERE p.flow_id = e.flow_id AND p.seq < e.seq "
            "AND p.state != 'acked' AND p.state != 'discarded'))")}
        placed = {r[0] for r in conn.execute("SELECT id FROM event WHERE pass IS NOT NULL")}
        assert placed == heads, f"heads {sorted(heads)}, placed {sorted(placed)}"
        # A head's dispatch time is its ready time or lease end; none while
        # quarantined or while its flow is paused (then it is not runnable).
        for event_id, flow_id, state, dispatch, next_at, lease_until, runnable in conn.execute(
                "SELECT event_id, flow_id, state, dispatch_ms, next_at_ms, lease_until_ms, runnable FROM event "
                "WHERE pass IS NOT NULL"):
            if state == "quarantined" or flow_id in paused_flows:
                assert dispatch is None and not runnable, f"head {event_id} is dispatched (paused or quarantined)"
            else:
                expected = next_at if next_at is not None else lease_until
                assert dispatch == expected, f"head {event_id}: dispatch {dispatch}, expected {expected}"
        early = conn.execute("SELECT id FROM event WHERE runnable = 1 AND dispatch_ms > ?", (now,)).fetchall()
        assert not early, f"runnable before due: {early}"
        actual = dict(conn.execute("SELECT state, count(*) FROM event GROUP BY state"))
        kept_columns = {r[1] for r in conn.execute("PRAGMA table_info(queue_state)")}
        names = [s for s in ("ready", "inflight", "acked", "quarantined", "discarded") if f"{s}_n" in kept_columns]
        kept = dict(zip(names, conn.execute(
            f"SELECT {', '.join(f'{s}_n' for s in names)} FROM queue_state").fetchone()))
        for state, n in kept.items():
            assert n == actual.get(state, 0), f"count {state}={n}, recounted {actual.get(state, 0)}"
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'tenant'").fetchone():
            # Each tenant counts its runnable heads and ready events exactly; an
            # event of a named flow carries its flow's tenant.
            recounted = dict(conn.execute("SELECT tenant_id, count(*) FROM event WHERE runnable = 1 "
                                          "AND tenant_id IS NOT NULL GROUP BY tenant_id"))
            ready = dict(conn.execute("SELECT tenant_id, count(*) FROM event WHERE state = 'ready' "
                                      "AND tenant_id IS NOT NULL GROUP BY tenant_id"))
            for tenant_id, runnable, ready_n in conn.execute("SELECT tenant_id, runnable, ready_n FROM tenant"):
                assert runnable == recounted.pop(tenant_id, 0), f"tenant {tenant_id}: runnable {runnable}"
                assert ready_n == ready.pop(tenant_id, 0), f"tenant {tenant_id}: ready_n {ready_n}"
            assert not recounted and not ready, f"heads or events of no stored tenant: {recounted} {ready}"
            strays = conn.execute("SELECT e.event_id FROM event AS e JOIN flow AS f ON f.flow_id = e.flow_id "
                                  "WHERE e.tenant_id IS NOT f.tenant_id").fetchall()
            assert not strays, f"events apart from their flow's tenant: {strays}"
        tombstones = conn.execute("SELECT count(*) FROM tombstone").fetchone()[0]
        assert conn.execute("SELECT tombstones_n FROM retention").fetchone()[0] == tombstones
        both = conn.execute("SELECT count(*) FROM tombstone JOIN event USING (event_id)").fetchone()[0]
        assert both == 0, "an event id is both stored and tombstoned"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def stored_clock(q: fairq.Queue) -> int:
    """The queue's stored clock in ms, as the refusal of an earlier `now` reports it (public API
    only; the stored clock must be past 0)."""
    try:
        q.claim(now=0)
    except fairq.ClockError as refused:
        return round(refused.stored * 1000)
    raise AssertionError("claim(now=0) was not refused: the stored clock is at 0")


def drain_order(q: fairq.Queue, *, now: float, limit: int = 1000) -> list[str]:
    """Claim and ack until idle; the event ids in claim order."""
    order = []
    for _ in range(limit):
        lease = q.claim(now=now)
        if lease is None:
            break
        order.append(lease.event_id)
        q.ack(lease, now=now)
    return order


# The relay receiver: an Inbox plus a projection of summed deltas. It mirrors the fair relay's
# counting business (examples/fair_relay.py): each accepted event adds its delta to its flow's
# total, in seq order, in the same transaction as the receipt.

# What the sender does with each answer from the receiver.
OUTCOME = {
    "accepted": "ack",
    "duplicate": "ack",
    "id_conflict": "fail",
    "sequence_conflict": "fail",
    "unsupported_delta": "fail",
    "gap": "retry",
    "unavailable": "retry",
}


class Receiver:
    def __init__(self, path: Path, *, max_delta: int = 1000) -> None:
        self.path = path
        self.max_delta = max_delta
        self.sends = 0
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS projection "
                "(flow TEXT PRIMARY KEY, total INTEGER NOT NULL, last_seq INTEGER NOT NULL)"
            )
        conn.close()
        self.inbox = fairq.Inbox(path)

    def send(self, lease: fairq.Lease) -> str:
        self.sends += 1
        delta = lease.body["delta"]
        if delta > self.max_delta:
            return "unsupported_delta"

        def add(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO projection (flow, total, last_seq) VALUES (:flow, :delta, :seq) "
                "ON CONFLICT (flow) DO UPDATE SET total = total + :delta, last_seq = :seq",
                {"flow": lease.flow, "delta": delta, "seq": lease.seq},
            )

        return self.inbox.receive(lease.event_id, lease.flow, lease.seq, lease.body, apply=add).value

    def projection(self) -> dict[str, tuple[int, int]]:
        conn = sqlite3.connect(self.path)
        try:
            return {f: (t, s) for f, t, s in conn.execute("SELECT flow, total, last_seq FROM projection")}
        finally:
            conn.close()

    def receipts(self) -> int:
        return self.inbox.received()

    def close(self) -> None:
        self.inbox.close()


def step(q: fairq.Queue, receiver: Receiver, *, now: float) -> tuple[str, str] | None:
    """One relay step: claim, send, settle. (event_id, receiver answer) or None when idle."""
    lease = q.claim(owner="relay", now=now)
    if lease is None:
        return None
    answer = receiver.send(lease)
    outcome = OUTCOME[answer]
    q.settle(lease, outcome, reason=None if outcome == "ack" else answer, now=now)
    return lease.event_id, answer


# HTTP: a server on a loopback port, raw requests, `fairq serve` subprocesses.

TOKEN = "t0ken-for-tests"


@contextlib.contextmanager
def running(queue: fairq.Queue, *, token: str | None = TOKEN, **kw: Any) -> Iterator[Server]:
    """A Server for `queue` on a free loopback port, serving on a thread."""
    server = Server(queue, token=token, port=0, **kw)
    # Polling for shutdown every 10 ms: a test waits at most that long for its server to stop.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)  # the timeout only stops a hang



def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    return b"".join(iter(lambda: sock.recv(65536), b""))


def exchange(server: Server, request: bytes) -> str:
    """Send raw bytes on a new connection; everything answered until the server closes it."""
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:  # the timeout only stops a hang
        sock.sendall(request)
        return read_all(sock).decode()

class Clock:
    """A server Queue's clock that tests move by hand: leases expire exactly, nothing sleeps."""

    def __init__(self, now: float = 1_764_432_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


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


# -- SQLite: raw rows, injected failures, old files --------------------------------------------


def snapshot(conn: sqlite3.Connection, tables: tuple[str, ...] = TABLES) -> list:
    """The rows of the queue's tables (or of `tables`), as `conn` sees them."""
    return [conn.execute(f"SELECT * FROM main.{t} ORDER BY 1").fetchall() for t in tables]  # noqa: S608


def inject(conn: sqlite3.Connection, table: str, op: str) -> None:
    """Make every `op` (INSERT, UPDATE) on `table` fail on `conn`: a TEMP trigger."""
    conn.execute(
        f"CREATE TEMP TRIGGER injected_failure BEFORE {op} ON main.{table} "
        "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    )


# -- the CLI in this process and in child processes, `fairq work` -------------------------------------------------


def fairq_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m fairq ARGS` in a child process with this checkout's fairq (no FAIRQ_DB)."""
    full_env = {k: v for k, v in os.environ.items() if k != "FAIRQ_DB"}
    full_env.update({"PYTHONPATH": str(ROOT / "src")}, **(env or {}))
    return subprocess.run([sys.executable, "-m", "fairq", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=120)


def cli(*args: str, cwd: Path, env: dict | None = None, input: str | bytes | None = None,
        unset: tuple[str, ...] = ("FAIRQ_DB",), hang: float = HANG) -> subprocess.CompletedProcess:
    """`fairq ARGS` run in this process (fairq.cli.main) as fairq_cli runs it in a child: in
    `cwd`, without the `unset` variables, with `env` added and `input` on stdin; stdout and
    stderr captured. Everything it changes is put back; SIGALRM stops a hung call."""
    from fairq.cli import main

    def hung(*_: object) -> None:
        raise TimeoutError(f"fairq {' '.join(args)} hung")

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    data = input.encode() if isinstance(input, str) else (input or b"")
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, hung)
    try:
        for name in unset:
            os.environ.pop(name, None)
        os.environ.update(env or {})
        os.chdir(cwd)
        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        signal.setitimer(signal.ITIMER_REAL, hang)
        status = main(list(args))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["fairq", *args], status, out.getvalue(), err.getvalue())


def start(db: Path, *args: str, marks: Path | None = None, cwd: Path = SUPPORT, **popen) -> subprocess.Popen:
    """`fairq --db DB work ARGS` started from tests/support/ (where its handlers are)."""
    env = {k: v for k, v in os.environ.items() if k != "FAIRQ_DB"}
    env.update(PYTHONPATH=str(ROOT / "src"), FAIRQ_TEST_MARKS=str(marks or db.parent))
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "fairq", "--db", str(db), "work", *args],
                            cwd=cwd, env=env, text=True, **popen)


def wait_for_marks(marks: Path, n: int) -> list[Path]:
    """The marks of the first `n` handlers that started (each leaves one)."""
    deadline = time.monotonic() + HANG
    while len(found := sorted(marks.iterdir())) < n:
        assert time.monotonic() < deadline, "no handler started"
        time.sleep(0.02)
    return found


def counts(db: Path) -> dict[str, int]:
    with fairq.Queue(db) as q:
        return q.stats().counts


def build_v1(path: Path) -> None:
    """A version 1 file with two events of flow A (A1 is the head) and an unordered one."""
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "schema_v1.sql").read_text(encoding="utf-8"))
    conn.executescript("""
        INSERT INTO flow (flow_id, name, next_seq) VALUES (1, 'A', 3);
        INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms,
                           pass, turn, dispatch_ms, runnable)
        VALUES ('A1', 1, 1, '{"n":1}', 'ready', 0, 0, 0, 0, 1, 0, 0),
               ('A2', 1, 2, '{"n":2}', 'ready', 0, 0, 0, NULL, NULL, NULL, 0),
               ('u1', NULL, 1, '{"n":3}', 'ready', 0, 0, 0, 0, 2, 0, 0);
        UPDATE clock SET ready_n = 3, enqueued_total = 3, turn = 2, now_ms = 0;
    """)
    conn.execute(f"PRAGMA application_id = {migrate.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


# -- metrics exposition ---------------------------------------------------------------------------


SAMPLE = re.compile(
    r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)\})?'
    r' (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|Inf|NaN))')


LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str], float]]]:
    """(family -> type, samples) of an exposition; asserts every line is well formed."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    helps: set[str] = set()
    samples = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in helps, f"second HELP for {name}"
            helps.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            assert name not in types, f"second TYPE for {name}"
            types[name] = kind
        else:
            found = SAMPLE.fullmatch(line)
            assert found, f"not a sample line: {line!r}"
            labels = dict(LABEL.findall(found["labels"] or ""))
            samples.append((found["name"], labels, float(found["value"])))
    for name, _, _ in samples:
        family = re.sub(r"_(bucket|count|sum)$", "", name) if name not in types else name
        assert family in types and family in helps, f"{name} has no TYPE/HELP before it"
    return types, samples


def place_order(q: fairq.Queue, app: Any, order_id: str, cents: int, *, begin: str = "BEGIN IMMEDIATE",
                param: Callable[[str], str] = lambda name: f":{name}") -> None:
    """An application's unit of work for the outbox tests: its `orders` row and its
    event in one transaction on its own connection `app` (`begin` opens it; `param`
    names a parameter in its SQL)."""
    app.execute(begin)
    try:
        app.execute(f"INSERT INTO orders VALUES ({param('id')}, {param('cents')})", {"id": order_id, "cents": cents})
        q.enqueue(f"paid-{order_id}", {"order": order_id, "cents": cents}, conn=app, now=1)
    except BaseException:
        app.execute("ROLLBACK")
        raise
    app.execute("COMMIT")
