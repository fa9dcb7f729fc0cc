"""Slow clients cannot lock anyone out: a request's head and body each have a
deadline, however slowly they trickle, and connections that have not shown a
token are closed to make room for new ones. The deadlines here are short so
that each test ends in a few seconds; socket timeouts only stop hangs."""

from __future__ import annotations

import socket
import threading
import time

import fairq
from helpers import TOKEN, eventually, read_all, running, start_serve

HANG = 10  # seconds: only stops a hang



class Slowloris:
    """`n` connections that each send a request head one byte at a time, a byte every
    `every` seconds, reconnecting when closed, until stopped."""

    HEAD = b"POST /v1/enqueue HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 200

    def __init__(self, address: tuple[str, int], n: int, every: float = 0.2) -> None:
        self.address, self.every = address, every
        self.stop = threading.Event()
        self.connects = 0
        self.threads = [threading.Thread(target=self._trickle, daemon=True) for _ in range(n)]
        for thread in self.threads:
            thread.start()

    def _trickle(self) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection(self.address, timeout=HANG) as sock:
                    self.connects += 1
                    for i in range(len(self.HEAD)):
                        if self.stop.wait(self.every):
                            return
                        sock.sendall(self.HEAD[i:i + 1])
            except OSError:
                pass  # closed by the server
            self.stop.wait(0.05)  # then connect again

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(HANG)


def test_clients_trickling_their_heads_cannot_lock_out_a_client_with_a_token(make_queue) -> None:
    with running(make_queue(), max_connections=4, head_timeout=2.0) as server:
        attack = Slowloris(server.server_address[:2], n=8)  # twice the connection cap
        try:
            assert eventually(lambda: server.connections == 4 and attack.connects >= 4, seconds=HANG)
            client = fairq.Client(server.url, token=TOKEN, timeout=3)
            for i in range(5):
                assert client.enqueue(f"e{i}", {"n": i}).created  # each answered despite the trickle
            assert server.evictions >= 5  # each request made room by closing a trickling connection
        finally:
            attack.close()
    assert [e.event_id for e in make_queue().events()] == [f"e{i}" for i in range(5)]


def test_a_head_that_does_not_arrive_within_the_head_timeout_is_answered_408_and_closed(make_queue) -> None:
    with running(make_queue(), head_timeout=0.25) as server:
        with socket.create_connection(server.server_address[:2], timeout=HANG) as sock:
            sock.sendall(b"POST /v1/enqueue HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            answer = read_all(sock).decode()
            took = time.monotonic() - started
        assert answer.startswith("HTTP/1.1 408") and '"request_timeout"' in answer and "Connection: close" in answer
        assert took < HANG / 2  # the deadline, not the hang guard
        with socket.create_connection(server.server_address[:2], timeout=HANG) as silent:
            assert read_all(silent) == b""  # sent nothing: closed without an answer
    assert make_queue().events() == []


def test_a_head_trickled_within_each_read_timeout_still_meets_the_deadline(make_queue) -> None:
    with running(make_queue(), head_timeout=0.5) as server:
        with socket.create_connection(server.server_address[:2], timeout=HANG) as sock:
            started = time.monotonic()
            try:
                for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100:
                    sock.sendall(bytes([byte]))  # a byte every 50 ms: no single read waits long
                    time.sleep(0.05)
            except OSError:
                pass  # the server closed the connection mid-trickle
            answer = read_all(sock).decode()
            took = time.monotonic() - started
    assert answer.startswith("HTTP/1.1 408")
    assert took < 3  # one deadline for the whole head, not one per read


def test_a_body_that_does_not_arrive_within_the_body_timeout_is_answered_408_and_nothing_is_written(
        make_queue) -> None:
    with running(make_queue(), body_timeout=0.5) as server:
        with socket.create_connection(server.server_address[:2], timeout=HANG) as sock:
            sock.sendall(b"POST /v1/enqueue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                         + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"event_id\"")
            answer = read_all(sock).decode()
    assert answer.startswith("HTTP/1.1 408") and "body did not arrive within 0.5 s" in answer
    assert make_queue().events() == []


def test_serve_takes_its_head_timeout_from_the_command_line(tmp_path) -> None:
    proc, url = start_serve(tmp_path / "q.db", "--port", "0", "--head-timeout", "0.3", "--body-timeout", "0.3",
                            env={"FAIRQ_TOKEN": TOKEN})
    try:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=HANG) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 408")
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)


def test_as_many_trickling_connections_as_fairq_serve_has_threads_do_not_lock_out_a_token_holder(tmp_path) -> None:
    """The reported case: 64 connections (the default cap) each holding a half-sent head."""
    proc, url = start_serve(tmp_path / "q.db", "--port", "0", env={"FAIRQ_TOKEN": TOKEN})
    host, port = url.removeprefix("http://").split(":")
    held = []
    try:
        for _ in range(64 + 8):
            sock = socket.create_connection((host, int(port)), timeout=HANG)
            sock.sendall(b"G")  # and then nothing, for as long as the server lets it
            held.append(sock)
        client = fairq.Client(url, token=TOKEN, timeout=3)
        started = time.monotonic()
        for i in range(3):
            assert client.enqueue(f"e{i}", i).created
        assert time.monotonic() - started < 3  # well inside the 5 s head timeout the trickle enjoys
        assert client.stats().counts["ready"] == 3
    finally:
        for sock in held:
            sock.close()
        proc.terminate()
        proc.communicate(timeout=HANG)
