"""Stopping the server and bounding its threads: a request in flight at shutdown is
answered before the Queue is closed, idle and stalled connections hold shutdown up
for at most the drain bound, and connections over the cap wait for a free thread.
Timeouts here only stop hangs, unless a test says it measures a bound."""

from __future__ import annotations

import http.client
import signal
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

import fairq
from fairq.http.server import Server
from helpers import TOKEN, eventually, raw, running, start_serve

HANG = 30  # seconds: only stops a hang
# A request whose body never comes in full: its thread waits for the rest.
STALLED = (b"POST /v1/enqueue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
           + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"event_id\"")


def kept_alive(server: Server) -> http.client.HTTPConnection:
    """A connection that made one request and stays open, its server thread waiting for the next."""
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=HANG)
    conn.request("GET", "/healthz")
    response = conn.getresponse()
    assert response.status == 200 and response.read() == b'{"status":"ok"}'
    return conn


def stop(server: Server, queue: fairq.Queue, log: list[str]) -> None:
    """What `fairq serve` does on SIGTERM: stop serving, close the server, then the Queue."""
    server.shutdown()
    server.server_close()
    log.append("server closed")
    queue.close()
    log.append("queue closed")


def test_a_request_running_at_shutdown_is_answered_before_the_queue_is_closed(make_queue) -> None:
    queue = make_queue()
    entered, release, log = threading.Event(), threading.Event(), []
    real_enqueue = queue.enqueue

    def slow_enqueue(*args, **kw):
        entered.set()
        release.wait(HANG)
        result = real_enqueue(*args, **kw)
        log.append("enqueued")
        return result

    queue.enqueue = slow_enqueue
    with running(queue, drain_seconds=0.1) as server:  # the call outlasts the drain bound
        answers = []
        request = threading.Thread(target=lambda: answers.append(
            raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {}})))
        request.start()
        assert entered.wait(HANG)
        stopper = threading.Thread(target=stop, args=(server, queue, log))
        stopper.start()
        stopper.join(0.5)
        assert stopper.is_alive() and log == []  # the stop waits for the call, past the bound
        release.set()
        stopper.join(HANG)
        request.join(HANG)
    assert log == ["enqueued", "server closed", "queue closed"]
    [answer] = answers
    assert answer.status == 201 and answer.json["created"] is True
    assert answer.headers["Connection"] == "close"  # no next request on a stopping server
    with fairq.Queue(queue.path) as again:
        assert [e.event_id for e in again.events()] == ["a"]


def test_an_idle_keep_alive_connection_does_not_hold_up_shutdown(make_queue) -> None:
    queue = make_queue()
    with running(queue, drain_seconds=HANG) as server:
        idle = kept_alive(server)
        started = time.monotonic()
        server.shutdown()
        server.server_close()
        took = time.monotonic() - started
        assert idle.sock.recv(1) == b""  # closed by the server
        idle.close()
    assert took < HANG / 2  # not the drain bound: an idle connection is closed at once


def test_a_stalled_request_holds_up_shutdown_only_for_the_drain_bound(make_queue) -> None:
    queue = make_queue()
    with running(queue, drain_seconds=0.2) as server:
        stalled = socket.create_connection(server.server_address[:2], timeout=HANG)
        stalled.sendall(STALLED)
        assert eventually(lambda: server.in_flight)  # the server has read its headers
        started = time.monotonic()
        server.shutdown()
        server.server_close()
        took = time.monotonic() - started
        assert stalled.recv(65536) == b""  # dropped unanswered: nothing was done
        stalled.close()
    # It waited for the request the whole bound, but not the 30 s a stalled client otherwise gets.
    assert 0.2 <= took < 10
    assert queue.events() == []


def test_connections_over_the_cap_wait_while_every_thread_answers_a_request(make_queue) -> None:
    with running(make_queue(), max_connections=2) as server:
        held = [socket.create_connection(server.server_address[:2], timeout=HANG) for _ in range(2)]
        for conn in held:
            conn.sendall(STALLED)  # authorised, mid-body: answering a request, never closed to make room
        assert eventually(lambda: server.in_flight == 2)
        waiting = socket.create_connection(server.server_address[:2], timeout=0.5)
        waiting.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        with pytest.raises(TimeoutError):
            waiting.recv(65536)  # no thread is free for it: it waits
        assert server.connections == 2 and server.evictions == 0
        held.pop().close()  # ends that request: its thread is free
        waiting.settimeout(HANG)
        assert waiting.recv(65536).startswith(b"HTTP/1.1 200")
        for conn in held + [waiting]:
            conn.close()


def test_an_idle_keep_alive_connection_is_closed_to_make_room_for_a_new_one(make_queue) -> None:
    with running(make_queue(), max_connections=2) as server:
        idle = [kept_alive(server) for _ in range(2)]
        answer = raw(server, "GET", "/v1/stats")  # a third connection, over the cap
        assert answer.status == 200 and server.evictions == 1
        assert idle[0].sock.recv(1) == b""  # the one idle longest was closed
        for conn in idle:
            conn.close()


def test_the_connection_cap_and_drain_bound_are_checked(make_queue) -> None:
    queue = make_queue()
    for kw, field in [({"max_connections": 0}, "max_connections"), ({"max_connections": 1.5}, "max_connections"),
                      ({"drain_seconds": -1}, "drain_seconds"), ({"head_timeout": 0}, "head_timeout"),
                      ({"body_timeout": -1}, "body_timeout")]:
        with pytest.raises(fairq.InvalidInput) as caught:
            Server(queue, token=TOKEN, port=0, **kw)
        assert caught.value.field == field


def test_serve_stops_after_its_drain_bound_while_a_client_stalls(tmp_path) -> None:
    proc, url = start_serve(tmp_path / "q.db", "--port", "0", "--drain-seconds", "0.2", "--max-connections", "4",
                            env={"FAIRQ_TOKEN": TOKEN})
    try:
        host, port = urlsplit(url).hostname, urlsplit(url).port
        stalled = socket.create_connection((host, port), timeout=HANG)
        stalled.sendall(STALLED)
        assert fairq.Client(url, token=TOKEN).stats().counts["ready"] == 0  # served beside it
    finally:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG)
    took = time.monotonic() - started
    assert stalled.recv(65536) == b""  # dropped unanswered
    stalled.close()
    assert proc.returncode == 0 and "finishing the requests in flight" in err and "stopped" in err
    assert took < 10  # not the 30 s a stalled client otherwise holds its thread
