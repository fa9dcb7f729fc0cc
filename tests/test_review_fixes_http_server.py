"""The server's count of connections stays true when a connection cannot get a thread, and a
connection whose whole request head has arrived is never closed to make room."""

from __future__ import annotations

import socket
import threading

import fairq
from fairq.http.handler import Handler
from helpers import TOKEN, raw, running

HANG = 10  # seconds: only stops a hang


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    return b"".join(iter(lambda: sock.recv(65536), b""))


def test_a_connection_that_gets_no_thread_is_closed_and_frees_its_place(make_queue, monkeypatch) -> None:
    with running(make_queue(), max_connections=1) as server:
        start = threading.Thread.start
        refused = []

        def no_thread_once(thread: threading.Thread) -> None:
            if not refused:
                refused.append(thread)
                raise RuntimeError("can't start new thread")
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", no_thread_once)
        try:
            with socket.create_connection(server.server_address[:2], timeout=HANG) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_all(sock) == b""  # closed without an answer
            assert refused
            assert server.connections == 0
            monkeypatch.undo()
            assert raw(server, "GET", "/healthz").status == 200  # its one place is free again
        finally:
            monkeypatch.undo()
            with server._changed:  # only so that a failing run does not hang in server_close
                server._open = {s for s in server._open if s.fileno() != -1}
