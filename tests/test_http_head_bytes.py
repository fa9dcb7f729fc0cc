"""Bytes inside a request head that a proxy and fairq serve could read two ways
are refused: a bare CR or another control character in a header line or the
request line answers 400 and closes the connection, and nothing is written.
One empty line before a request line is ignored, as HTTP/1.1 allows."""

from __future__ import annotations


import pytest

from helpers import TOKEN, exchange

BODY = b'{"event_id": "a", "body": 1}'


def enqueue(extra_headers: bytes, *, first: bytes = b"POST /v1/enqueue HTTP/1.1\r\n") -> bytes:
    return (first + b"Host: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
            + b"Content-Type: application/json\r\n" + extra_headers
            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BODY) + BODY)


@pytest.mark.parametrize("line", [
    b"X-A: a\rContent-Length: 5\r\n",     # a bare CR that a proxy keeps inside one header
    b"X-A: a\r\r\n",                       # a bare CR that would end the head early
    b"X-A: a\x00b\r\n",                    # NUL
    b"X-A: a\x1bb\r\n",                    # another control character
])
def test_a_header_line_with_a_bare_cr_or_control_character_is_refused(server, make_queue, line) -> None:
    answer = exchange(server, enqueue(line))
    assert answer.startswith("HTTP/1.1 400") and "control character" in answer
    assert answer.count("HTTP/1.1") == 1
    assert make_queue().events() == []


def test_a_request_line_with_a_control_character_is_refused(server, make_queue) -> None:
    answer = exchange(server, enqueue(b"", first=b"POST /v1/enqueue\x0b HTTP/1.1\r\n"))
    assert answer.startswith("HTTP/1.1 400")
    assert make_queue().events() == []


def test_one_empty_line_before_the_request_line_is_ignored(server, make_queue) -> None:
    answer = exchange(server, b"\r\n" + enqueue(b""))
    assert answer.startswith("HTTP/1.1 201"), answer[:200]
    assert [e.event_id for e in make_queue().events()] == ["a"]


def test_a_tab_inside_a_header_value_is_still_accepted(server, make_queue) -> None:
    answer = exchange(server, enqueue(b"X-Note: a\tb\r\n"))
    assert answer.startswith("HTTP/1.1 201"), answer[:200]
