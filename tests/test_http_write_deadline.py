"""A client that does not read its answers cannot hold a server thread: an
answer has a deadline to be taken, and a connection that has not shown a token
can be closed to make room even while it is being answered. Real sockets
against a real server; each attacker's receive buffer is tiny, so the server's
writes to it really block."""

from __future__ import annotations

import importlib.resources
import select
import socket
import statistics
import threading
import time

import fairq
from helpers import TOKEN, eventually, read_all, running

HANG = 10  # seconds: only stops a hang
SMALL_BUFFER = 2048  # bytes: the attacker's receive buffer


def _pipelined(path: str, n: int, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode() * n


def _closed(sock: socket.socket) -> bool:
    """Has the server closed (or reset) this connection? Unread answers do not count."""
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(0))


class NonReaders:
    """`n` connections that each pipeline `per_connection` requests for `path` and
    never read an answer; each reconnects and starts again when the server closes it."""

    def __init__(self, address: tuple[str, int], n: int, path: str, per_connection: int = 400,
                 token: str | None = None) -> None:
        self.address = address
        self.requests = _pipelined(path, per_connection, token)
        self.stop = threading.Event()
        self.connects = 0
        self.threads = [threading.Thread(target=self._attack, daemon=True) for _ in range(n)]
        for thread in self.threads:
            thread.start()

    def _attack(self) -> None:
        while not self.stop.is_set():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)  # before connect: it sets the window
                sock.settimeout(0.2)
                sock.connect(self.address)
                self.connects += 1
                sent = 0
                while not self.stop.is_set() and not _closed(sock):
                    if sent < len(self.requests):
                        try:
                            sent += sock.send(self.requests[sent:sent + 65536])
                        except TimeoutError:
                            pass  # the server is not reading our requests right now
                    else:
                        self.stop.wait(0.02)
            except OSError:
                pass  # closed or reset by the server
            finally:
                sock.close()

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(HANG)


def _latencies(call, n: int) -> tuple[list[float], list[BaseException]]:
    took, failed = [], []
    for _ in range(n):
        started = time.monotonic()
        try:
            call()
        except fairq.FairqError as exc:
            failed.append(exc)
        took.append(time.monotonic() - started)
    return took, failed


def test_connections_without_a_token_that_pipeline_and_never_read_cannot_lock_out_a_token_holder(make_queue) -> None:
    q = make_queue()
    q.enqueue("e0", {"n": 0})
    with running(q, max_connections=8) as server:
        attack = NonReaders(server.server_address[:2], n=12, path="/ui/console.js")  # more than the threads
        try:
            assert eventually(lambda: server.connections == 8 and attack.connects >= 8, seconds=HANG)
            time.sleep(0.5)  # every thread is now blocked answering an attacker (before the fix)
            client = fairq.Client(server.url, token=TOKEN, timeout=3)
            took, failed = _latencies(client.stats, 20)
            lease = None if failed else client.claim(owner="holder")
        finally:
            attack.close()
    print(f"token holder under attack: median {statistics.median(took):.3f} s, max {max(took):.3f} s, "
          f"{len(failed)} of {len(took)} failed")
    assert failed == []
    assert max(took) < 2.0  # the attack costs a token holder no more than an eviction per call
    assert lease is not None and lease.event_id == "e0"


def test_a_token_holder_that_does_not_read_loses_its_connection_after_the_send_timeout(make_queue) -> None:
    with running(make_queue(), max_connections=4, send_timeout=1.0) as server:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
            sock.settimeout(HANG)
            sock.connect(server.server_address[:2])
            sock.sendall(_pipelined("/ui/console.js", 100, token=TOKEN))  # answers far over every buffer
            assert eventually(lambda: server.in_flight == 1, seconds=HANG)  # with the token: not closed to make room
            started = time.monotonic()
            assert eventually(lambda: server.connections == 0, seconds=HANG)
            assert time.monotonic() - started < 1.0 + 5  # the send timeout, and room for a loaded machine
            assert read_all(sock).count(b"HTTP/1.1 200 OK") < 100  # cut short, then closed


def test_an_answer_that_is_being_read_is_sent_whole_past_no_deadline(make_queue) -> None:
    """The deadline bounds an answer that is not taken, not a client that takes it."""
    with running(make_queue(), send_timeout=1.0) as server:
        with socket.create_connection(server.server_address[:2], timeout=HANG) as sock:
            last = b"GET /ui/console.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            sock.sendall(_pipelined("/ui/console.js", 49) + last)
            got = read_all(sock)
    size = len((importlib.resources.files("fairq.http") / "console" / "console.js").read_bytes())
    assert got.count(b"HTTP/1.1 200 OK") == 50
    assert got.count(f"Content-Length: {size}\r\n".encode()) == 50
    assert len(got) > 50 * size


def test_a_send_timeout_that_is_not_a_positive_number_of_seconds_is_refused_naming_it(make_queue) -> None:
    from fairq.http.server import Server
    for bad in (0, -1.0, float("nan"), "10"):
        try:
            Server(make_queue(), token=TOKEN, port=0, send_timeout=bad)
        except fairq.InvalidInput as exc:
            assert exc.field == "send_timeout"
        else:
            raise AssertionError(f"send_timeout={bad!r} was accepted")
