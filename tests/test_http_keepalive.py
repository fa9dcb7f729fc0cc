"""fairq.Client keeps one connection per thread open, and the server serves many requests
on it: a kept connection the server closed while idle is replaced before a request is
sent, and a request that may have reached the server is never sent twice."""

from __future__ import annotations

import re
import socket
import threading
import time
from typing import Any

import pytest

import fairq
from helpers import TOKEN, running

HANG = 10  # seconds: only stops a hang


def counting_claims(queue: fairq.Queue, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every claim the server's Queue makes, recorded (a resent request would show twice)."""
    made: list[Any] = []
    claim = queue.claim

    def counted(**kw: Any) -> Any:
        made.append(kw)
        return claim(**kw)

    monkeypatch.setattr(queue, "claim", counted)
    return made


def test_a_clients_calls_share_one_connection_that_the_server_keeps_open(make_queue) -> None:
    with running(make_queue()) as server:
        client = fairq.Client(server.url, token=TOKEN)
        for i in range(5):
            client.enqueue(f"e{i}", {"i": i}, flow="f")
        lease = client.claim()
        assert lease is not None
        client.ack(lease)
        assert client.stats().counts["ready"] == 4
        assert client._http.opened == 1
        assert server.connections == 1  # still open, waiting for the next request
        client.close()


def test_each_thread_of_a_client_has_its_own_connection(make_queue) -> None:
    with running(make_queue()) as server:
        client = fairq.Client(server.url, token=TOKEN)
        threads = [threading.Thread(target=lambda: [client.stats() for _ in range(3)]) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG)
        assert client._http.opened == 3
        client.close()


def test_a_connection_the_server_closed_when_idle_is_reopened_and_the_call_made_once(make_queue,
                                                                                     monkeypatch) -> None:
    queue = make_queue()
    with running(queue, head_timeout=0.2) as server:
        made = counting_claims(queue, monkeypatch)
        client = fairq.Client(server.url, token=TOKEN)
        client.enqueue("a", {}, flow="f1")
        client.enqueue("b", {}, flow="f2")
        assert client.claim() is not None
        deadline = time.monotonic() + HANG
        while server.connections and time.monotonic() < deadline:
            time.sleep(0.01)  # the server closes the idle connection after its head deadline
        assert server.connections == 0
        assert client.claim() is not None  # sent on a new connection
        assert len(made) == 2 and client._http.opened == 2
        client.close()


def test_an_idle_client_connection_is_closed_first_to_make_room_and_its_next_call_is_made_once(
        make_queue, monkeypatch) -> None:
    queue = make_queue()
    with running(queue, max_connections=1) as server:
        made = counting_claims(queue, monkeypatch)
        idle, other = fairq.Client(server.url, token=TOKEN), fairq.Client(server.url, token=TOKEN)
        idle.enqueue("a", {}, flow="f1")
        idle.enqueue("b", {}, flow="f2")
        assert other.stats().counts["ready"] == 2  # the only place was idle's: it was closed for this one
        assert server.evictions == 1
        assert idle.claim() is not None  # its closed connection is replaced before sending
        assert len(made) == 1 and idle._http.opened == 2
        assert server.evictions == 2  # other's idle connection made room this time
        idle.close()
        other.close()


class OneAnswerThenHangUp:
    """A server that answers the first request on a connection and closes the connection
    after reading the second, unanswered: the second may have taken effect."""

    ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\nnull")

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.requests: list[bytes] = []
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        self.listener.settimeout(HANG)
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(HANG)
                for answered in (True, False):
                    request = self._read_request(conn)
                    if request is None:
                        break
                    self.requests.append(request)
                    if answered:
                        conn.sendall(self.ANSWER)

    @staticmethod
    def _read_request(conn: socket.socket) -> bytes | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += conn.recv(65536)
        return head

    def close(self) -> None:
        self.listener.close()


def test_a_write_whose_connection_breaks_after_sending_raises_unavailable_and_is_not_sent_again() -> None:
    fake = OneAnswerThenHangUp()
    try:
        client = fairq.Client(fake.url, token=TOKEN)
        assert client.claim() is None  # answered on the connection, which is kept
        with pytest.raises(fairq.Unavailable):
            client.claim()  # read by the server, then the connection closed unanswered
        assert len(fake.requests) == 2 and fake.connections == 1  # not sent again on a new one
        client.close()
    finally:
        fake.close()


STATS = b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"


def answers_until_closed(server: Any, request: bytes) -> list[str]:
    """The status lines the server sends on one connection before it closes it."""
    with socket.create_connection(server.server_address[:2], timeout=HANG) as sock:
        sock.sendall(request)
        received = b"".join(iter(lambda: sock.recv(65536), b""))
    return re.findall(r"HTTP/1\.1 \d{3} [^\r]*", received.decode())


def test_requests_sent_together_on_one_connection_are_answered_in_turn_until_one_says_close(make_queue) -> None:
    with running(make_queue()) as server:
        statuses = answers_until_closed(server, STATS + b"\r\n" + STATS + b"\r\n"
                                        + STATS + b"Connection: close\r\n\r\n" + STATS + b"\r\n")
        assert statuses == ["HTTP/1.1 200 OK"] * 3  # the fourth, after close, is not read


def test_an_http_1_0_request_is_answered_and_its_connection_closed(make_queue) -> None:
    with running(make_queue()) as server:
        one_zero = STATS.replace(b"HTTP/1.1", b"HTTP/1.0")
        assert answers_until_closed(server, one_zero + b"\r\n" + STATS + b"\r\n") == ["HTTP/1.1 200 OK"]
        assert answers_until_closed(server, one_zero + b"Connection: keep-alive\r\n\r\n"
                                    + STATS + b"Connection: close\r\n\r\n") == ["HTTP/1.1 200 OK"] * 2


def test_header_names_are_matched_without_regard_to_case_and_values_trimmed(make_queue) -> None:
    with running(make_queue()) as server:
        request = (b"GET /v1/stats HTTP/1.1\r\nhost: x\r\nauthorization:   Bearer " + TOKEN.encode()
                   + b"\r\nCONNECTION: close\r\n\r\n")
        assert answers_until_closed(server, request) == ["HTTP/1.1 200 OK"]


def test_a_bad_request_line_or_http_2_is_refused_and_closed(make_queue) -> None:
    with running(make_queue()) as server:
        for line, status in [(b"GET /v1/stats HTTP/x.1", "400"), (b"GET /v1/stats HTTP/2.0", "505"),
                             (b"GET /v1/stats extra HTTP/1.1", "400"), (b"POST /v1/stats", "400")]:
            statuses = answers_until_closed(server, line + b"\r\nHost: x\r\n\r\n" + STATS + b"\r\n")
            assert len(statuses) == 1 and statuses[0].startswith(f"HTTP/1.1 {status}"), (line, statuses)
