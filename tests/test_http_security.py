"""The HTTP edge refuses what it must: no or wrong token, bad framing, oversize or
non-JSON bodies, wrong types; every refusal is JSON with a machine code, nothing is
written, and no stack trace ever leaves the server."""

from __future__ import annotations

import hmac
import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

import fairq
from fairq.http.routes import ROUTES
from fairq.http.server import Server
from helpers import TOKEN, exchange, raw, read_all, running


def every_protected_route() -> list[tuple[str, str]]:
    return [(r.method, "/" + "/".join("x" if s.startswith("{") else s for s in r.segments))
            for r in ROUTES if not r.public]


def test_every_endpoint_but_healthz_refuses_a_request_without_a_token(server, make_queue) -> None:
    routes = every_protected_route()
    assert len(routes) >= 21 and ("GET", "/metrics") in routes
    for method, path in routes:
        body = {"event_id": "a", "body": {}} if method == "POST" else None
        answer = raw(server, method, path, body, token=None)
        assert answer.status == 401, (method, path, answer)
        assert answer.json["error"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert make_queue().events() == [] and make_queue().schedules.list() == []


def test_a_wrong_token_is_refused_like_no_token(server, make_queue) -> None:
    for token in ("wrong", TOKEN + "x", TOKEN[:-1], ""):
        answer = raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {}}, token=token)
        assert (answer.status, answer.json["error"]) == (401, "unauthorized"), token
    for header in ("Basic " + TOKEN, TOKEN, "Bearer"):
        answer = raw(server, "GET", "/v1/stats", token=None, headers={"Authorization": header})
        assert answer.status == 401, header
    assert make_queue().events() == []
    with pytest.raises(fairq.RemoteError) as caught:
        fairq.Client(server.url, token="wrong").stats()
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")


def test_tokens_are_compared_in_constant_time(server, monkeypatch) -> None:
    compared = []

    def spy(a, b):
        compared.append((len(a), len(b)))
        return real(a, b)

    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert raw(server, "GET", "/v1/stats", token="short").status == 401
    assert raw(server, "GET", "/v1/stats").status == 200
    assert compared == [(32, 32), (32, 32)]  # digests: the token's length does not show either


def test_an_unknown_route_is_404_and_a_wrong_method_405(server) -> None:
    answer = raw(server, "GET", "/v1/nothing")
    assert (answer.status, answer.json["error"]) == (404, "not_found")
    answer = raw(server, "GET", "/v1/claim")
    assert (answer.status, answer.json["error"], answer.headers["Allow"]) == (405, "method_not_allowed", "POST")
    answer = raw(server, "DELETE", "/v1/events/a")
    assert answer.status == 405 and answer.headers["Allow"] == "GET"
    # Without a token, an unknown route is refused before it is looked up.
    assert raw(server, "GET", "/v1/nothing", token=None).status == 401


def test_malformed_json_is_400_and_names_the_problem(server, make_queue) -> None:
    for body, problem in [(b"{", "not valid JSON"), (b'{"event_id": "a", "event_id": "b", "body": 1}', "event_id: is a duplicate key"),
                          (b'{"event_id": "a", "body": NaN}', "NaN"), (b"[1, 2]", "JSON object"),
                          (b"\xff\xfe", "not valid JSON"), (b"", "not valid JSON"),
                          (b"[" * 100_000 + b"]" * 100_000, "not valid JSON")]:
        answer = raw(server, "POST", "/v1/enqueue", body)
        assert (answer.status, answer.json["error"]) == (400, "invalid_json"), body[:20]
        assert problem in answer.json["message"]
    assert make_queue().events() == []


def test_wrong_types_and_unknown_keys_are_400_naming_the_field(server, make_queue) -> None:
    for path, body, field in [
        ("/v1/enqueue", {"event_id": 5, "body": {}}, "event_id"),
        ("/v1/enqueue", {"event_id": "a", "body": {}, "delay": "soon"}, "delay"),
        ("/v1/enqueue", {"event_id": "a", "body": {}, "now": 0}, "now"),
        ("/v1/enqueue", {"event_id": "a"}, "body"),
        ("/v1/enqueue_many", {"items": {"a": 1}}, "items"),
        ("/v1/enqueue_many", {"items": [["a", 1], 7]}, "items[1]"),
        ("/v1/claim_many", {"n": "3"}, "n"),
        ("/v1/claim", {"lease_seconds": -1}, "lease_seconds"),
        ("/v1/settle", {"lease": "a", "outcome": "ack"}, "lease"),
        ("/v1/settle", {"lease": {"event_id": "a"}, "outcome": "ack"}, "lease.generation"),
        ("/v1/settle", {"lease": {"event_id": "a", "generation": 1, "secret": 1}, "outcome": "ack"}, "lease.secret"),
        ("/v1/settle", {"lease": {"event_id": "a", "generation": 1}, "outcome": "ack", "reason": "x"}, "reason"),
        ("/v1/settle_many", {"items": [{"lease": {"event_id": "a", "generation": True}, "outcome": "ack"}]},
         "items[0].lease.generation"),
        ("/v1/extend", {"lease": {"event_id": "a", "generation": 1}, "seconds": "long"}, "seconds"),
        ("/v1/redrive", {"event_id": "a", "expected_generation": 1}, "reason"),
    ]:
        answer = raw(server, "POST", path, body)
        assert (answer.status, answer.json["error"], answer.json.get("field")) == (400, "invalid_input", field), path
    for query, field in [("limit=ten", "limit"), ("state=gone", "state"), ("limit=1&limit=2", "limit"),
                         ("owner=x", "owner")]:
        answer = raw(server, "GET", "/v1/events?" + query)
        assert (answer.status, answer.json.get("field")) == (400, field), query
    assert make_queue().events() == []


def test_an_oversize_body_is_413_before_it_is_read(make_queue) -> None:
    with running(make_queue(), max_request_bytes=1000) as server:
        host, port = server.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as sock:  # the timeout only stops a hang
            # The headers promise 10 MB that never come: answering at all proves nothing was read.
            sock.sendall(b"POST /v1/enqueue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                         + b"\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n")
            answer = read_all(sock).decode()  # until the server closes
        assert answer.startswith("HTTP/1.1 413") and '"too_large"' in answer and "Connection: close" in answer
        body = {"event_id": "a", "body": "x" * 2000}
        with pytest.raises(fairq.InvalidInput) as caught:
            fairq.Client(server.url, token=TOKEN).enqueue(**body)
        assert "over the limit of 1000" in str(caught.value)
        # It names the limit the body would meet next, once the request limit is raised.
        assert f"max_body_bytes ({make_queue().max_body_bytes} bytes" in str(caught.value)
    assert make_queue().events() == []


def test_a_missing_length_or_a_chunked_body_is_refused(server) -> None:
    answer = raw(server, "POST", "/v1/claim", b"{}", skip_length=True)
    assert (answer.status, answer.json["error"]) == (411, "length_required")
    answer = raw(server, "POST", "/v1/claim", b"2\r\n{}\r\n0\r\n\r\n", skip_length=True,
                 headers={"Transfer-Encoding": "chunked"})
    assert (answer.status, answer.json["error"]) == (411, "length_required")
    answer = raw(server, "POST", "/v1/claim", b"{}", headers={"Content-Length": "-2"}, skip_length=True)
    assert (answer.status, answer.json["field"]) == (400, "Content-Length")


def test_a_body_that_is_not_json_by_content_type_is_415(server) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"):
        answer = raw(server, "POST", "/v1/claim", b"{}", headers={"Content-Type": content_type})
        assert (answer.status, answer.json["error"]) == (415, "unsupported_media_type"), content_type
    assert raw(server, "POST", "/v1/claim", b"{}", headers={"Content-Type": "application/json; charset=UTF-8"}
               ).status == 204


def test_a_get_with_a_body_is_refused(server) -> None:
    answer = raw(server, "GET", "/v1/stats", {"top": 1})
    assert (answer.status, answer.json["field"]) == (400, "request")


def test_http_level_garbage_is_answered_with_json_too(server) -> None:
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:  # the timeout only stops a hang
        sock.sendall(b"BREW /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_all(sock).decode()  # until the server closes
    assert answer.startswith("HTTP/1.1 501") and '"not_implemented"' in answer
    assert "Python" not in answer and "<html" not in answer.lower()


def test_the_server_header_does_not_name_python(server) -> None:
    assert raw(server, "GET", "/healthz").headers["Server"].split()[0] == "fairq"
    assert "Python" not in raw(server, "GET", "/healthz").headers["Server"]


def test_keep_alive_carries_several_requests_on_one_connection(server) -> None:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)  # the timeout only stops a hang
    try:
        for _ in range(3):
            conn.request("POST", "/v1/claim", b"{}", {"Authorization": f"Bearer {TOKEN}",
                                                       "Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert response.status == 204
        first_socket = conn.sock
        conn.request("GET", "/v1/stats", headers={"Authorization": f"Bearer {TOKEN}"})
        assert conn.getresponse().status == 200 and conn.sock is first_socket
    finally:
        conn.close()


def test_no_auth_is_refused_unless_the_address_is_loopback(make_queue) -> None:
    queue = make_queue()
    with pytest.raises(fairq.InvalidInput) as caught:
        Server(queue, token=None, host="0.0.0.0", port=0)
    assert caught.value.field == "token"
    for bad in ("", "has space", "naïve"):
        with pytest.raises(fairq.InvalidInput):
            Server(queue, token=bad, port=0)


def test_without_auth_only_requests_addressed_to_loopback_are_served(make_queue) -> None:
    with running(make_queue(), token=None) as server:
        assert raw(server, "GET", "/v1/stats", token=None).status == 200
        assert raw(server, "GET", "/v1/stats", token=None, headers={"Host": "localhost:1"}).status == 200
        assert raw(server, "GET", "/v1/stats", token=None, headers={"Host": "[::1]:1"}).status == 200
        for host in ("evil.example:80", "127.0.0.1.evil.example", "[", "localhost.:1"):
            rebound = raw(server, "GET", "/v1/stats", token=None, headers={"Host": host})
            assert (rebound.status, rebound.json["error"]) == (403, "forbidden"), host


def test_the_client_does_not_follow_redirects_with_its_token(server) -> None:
    seen = []

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", server.url + "/v1/stats")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    other = HTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=other.handle_request, daemon=True)
    thread.start()
    try:
        with pytest.raises(fairq.RemoteError) as caught:
            fairq.Client(f"http://127.0.0.1:{other.server_address[1]}", token=TOKEN).stats()
    finally:
        thread.join(timeout=10)  # the timeout only stops a hang
        other.server_close()
    assert caught.value.status == 302 and len(seen) == 1


def test_the_client_refuses_a_url_that_is_not_http() -> None:
    for url in ("ftp://host/", "127.0.0.1:8765", "http://", 5):
        with pytest.raises(fairq.InvalidInput) as caught:
            fairq.Client(url)
        assert caught.value.field == "url"



ENQUEUE_HEAD = (b"POST /v1/enqueue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                + b"\r\nContent-Type: application/json\r\n")
ENQUEUE_BODY = b'{"event_id": "a", "body": 1}'


@pytest.mark.parametrize("lengths", [(28, 28), (28, 0), (0, 28)])
def test_two_content_lengths_are_refused_even_when_equal(server, make_queue, lengths) -> None:
    framing = b"".join(b"Content-Length: %d\r\n" % n for n in lengths)
    answer = exchange(server, ENQUEUE_HEAD + framing + b"Connection: keep-alive\r\n\r\n" + ENQUEUE_BODY)
    assert answer.startswith("HTTP/1.1 400") and '"bad_request"' in answer and "Content-Length" in answer
    assert "Connection: close" in answer and answer.count("HTTP/1.1") == 1  # the body is not taken as a request
    assert make_queue().events() == []


def test_transfer_encoding_is_refused_saying_what_to_send(server, make_queue) -> None:
    chunked = b"Transfer-Encoding: chunked\r\n\r\n1c\r\n" + ENQUEUE_BODY + b"\r\n0\r\n\r\n"
    answer = exchange(server, ENQUEUE_HEAD + chunked)
    assert answer.startswith("HTTP/1.1 411") and "send Content-Length" in answer
    answer = exchange(server, ENQUEUE_HEAD + b"Content-Length: 28\r\n" + chunked)
    assert answer.startswith("HTTP/1.1 400") and '"bad_request"' in answer and "Connection: close" in answer
    answer = exchange(server, b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert answer.startswith("HTTP/1.1 411")
    assert make_queue().events() == []


def test_expect_100_continue_is_answered_only_after_the_token_is_checked(server, make_queue) -> None:
    expect = b"Content-Length: 28\r\nExpect: 100-continue\r\n\r\n"
    wrong = ENQUEUE_HEAD.replace(TOKEN.encode(), b"wrong")
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(wrong + expect)  # and waits for 100 Continue before sending the body
        answer = read_all(sock).decode()
    assert answer.startswith("HTTP/1.1 401") and "100 Continue" not in answer
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(ENQUEUE_HEAD + expect)
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(ENQUEUE_BODY)
        assert sock.recv(65536).startswith(b"HTTP/1.1 201")
    assert [e.event_id for e in make_queue().events()] == ["a"]


@pytest.mark.parametrize("line", [b"NoColonHere", b" folded: line", b"Bad Name: x", b": empty name"])
def test_a_malformed_header_line_is_400(server, make_queue, line) -> None:
    answer = exchange(server, ENQUEUE_HEAD + line + b"\r\nContent-Length: 28\r\n\r\n" + ENQUEUE_BODY)
    assert answer.startswith("HTTP/1.1 400") and '"bad_request"' in answer and "header" in answer
    assert make_queue().events() == []


def test_the_server_header_is_exactly_fairq(server) -> None:
    assert raw(server, "GET", "/healthz").headers["Server"] == "fairq"


@pytest.mark.parametrize("content_type", ["application/json; charset*=utf-8''utf-8", "application/json; charset",
                                          "application/json; boundary=x", "application/jsonx",
                                          "application/json; charset=utf-8; charset=latin-1"])
def test_an_unusual_json_content_type_is_415_saying_what_to_send(server, content_type) -> None:
    answer = raw(server, "POST", "/v1/claim", b"{}", headers={"Content-Type": content_type})
    assert (answer.status, answer.json["error"]) == (415, "unsupported_media_type"), content_type
    assert "send Content-Type: application/json" in answer.json["message"]


def test_a_missing_length_is_411_saying_what_to_send(server) -> None:
    answer = raw(server, "POST", "/v1/claim", b"{}", skip_length=True)
    assert answer.status == 411 and "send Content-Length" in answer.json["message"]
