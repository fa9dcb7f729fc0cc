"""The server's count of connections stays true when a connection cannot get a thread, and a
connection whose whole request head has arrived is never closed to make room."""

from __future__ import annotations

import socket
import threading

from fairq.http.handler import Handler
from helpers import TOKEN, raw, read_all, running

HANG = 10  # seconds: only stops a hang



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


class SeenWaiting(threading.Condition):
    """The server's condition, telling the test when a thread starts waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_a_connection_whose_whole_head_has_arrived_is_not_closed_to_make_room(make_queue, monkeypatch) -> None:
    """The head is complete and carries the token; a new connection arrives while the server
    is still judging it (held here in the token check) and finds every place taken."""
    with running(make_queue(), max_connections=1) as server:
        server._changed = seen = SeenWaiting()  # no connection yet: nothing holds the old one
        judging, go_on = threading.Event(), threading.Event()
        authenticate = Handler._authenticate

        def held(handler: Handler) -> None:
            judging.set()
            go_on.wait(HANG)
            authenticate(handler)

        monkeypatch.setattr(Handler, "_authenticate", held)
        answers: list[object] = []

        def first() -> None:
            try:
                answers.append(raw(server, "GET", "/v1/stats", token=TOKEN).status)
            except Exception as exc:  # the connection was closed under it
                answers.append(exc)

        thread = threading.Thread(target=first)
        thread.start()
        assert judging.wait(HANG)
        with socket.create_connection(server.server_address[:2], timeout=HANG) as second:
            second.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert seen.waiting.wait(HANG)  # the new connection found no place
            assert server.evictions == 0  # and closed none to make one
            go_on.set()
            thread.join(HANG)
            assert answers == [200]
            assert read_all(second).startswith(b"HTTP/1.1 200")  # then it was served
