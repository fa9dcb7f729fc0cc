"""Answering one connection's requests for a Server (fairq.http.server).

Per request: read the head under its deadline (fairq.http.framing), judge
the body's framing, check the token (every route but /healthz), find the
route, read and check the body under its deadline, make the endpoint's one
Queue call (fairq.http.routes), and answer JSON (fairq.http.wire), which
the client must take within the server's send_timeout. Which connections
may be closed to make room, and the drain on shutdown, are the Server's;
this module only tells it when a request begins (its whole head has
arrived, with or without the token) and ends. It sees the server through
the Protocol of fairq.http.serving, so it does not import the server.
"""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import io
import ipaddress
import logging
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .._json import StrictJSONError, canonical, loads_strict
from ..errors import FairqError, InvalidInput, StoreError
from .framing import DeadlineReader, Head, Headers, HeadRefused, body_length, is_json_type, parse_head, read_head
from . import console_api as _console_api  # noqa: F401  (registers the console's endpoints)
from . import listings as _listings  # noqa: F401  (registers the listings)
from .routes import Edge, Refusal, Request, Route, Text, matching
from .serving import Serving
from .wire import STATUS, error_code, error_json, queue_error_json

__all__ = ["Handler", "is_loopback", "digest_of"]

log = logging.getLogger("fairq")

_MAX_QUERY_FIELDS = 20
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Refusals of the request head itself (bad request line or header lines, oversize
# or late heads, unknown method), by status.
_PROTOCOL_ERRORS = {408: "request_timeout", 414: "too_large", 431: "too_large", 501: "not_implemented"}


def is_loopback(host: str) -> bool:
    """Is `host` "localhost" or a loopback address literal (127.0.0.0/8, ::1)?"""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def digest_of(token: bytes) -> bytes:
    # Comparing fixed-length digests keeps the comparison's time independent of
    # both the content and the length of the token.
    return hashlib.sha256(token).digest()


class _Dropped(Exception):
    """The client stopped sending mid-request; there is no one to answer."""


class Handler(BaseHTTPRequestHandler):
    server: Serving  # type: ignore[assignment]  # a Server (fairq.http.server), seen through what it offers here
    headers: Headers  # type: ignore[assignment]  # parsed by framing.parse_head, not the email parser
    _headers_buffer: list[bytes]  # http.server's: the answer's head, until flush_headers()
    protocol_version = "HTTP/1.1"
    server_version = "fairq"
    # A 100 Continue and its answer leave in two writes; without TCP_NODELAY a
    # keep-alive client's delayed ACK would stall the second for tens of milliseconds.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # its reference would keep the socket open after shutdown_request
        self._reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def version_string(self) -> str:
        return self.server_version

    def handle_one_request(self) -> None:
        """Read one request head within head_timeout, then answer it (or refuse it and close)."""
        self.close_connection = True  # unless a whole request is read and answered
        self.requestline, self.request_version, self.command = "", "", ""
        self._reader.start(self.server.head_timeout)
        try:
            head = read_head(self.rfile)
        except HeadRefused as refused:
            self.send_error(refused.status, refused.message)
            return
        except TimeoutError:
            if self._reader.received:  # a client that sent nothing is closed without a word
                self.send_error(408, f"the request head did not arrive within {self.server.head_timeout:g} s")
            return
        except OSError:
            return  # reset by the client
        if head is None:
            return  # the client closed, or the connection was closed to make room
        self.raw_requestline = head[0]
        self.requestline = str(head[0], "iso-8859-1").rstrip("\r\n")
        try:
            parsed = parse_head(*head)
        except HeadRefused as refused:
            self.send_error(refused.status, refused.message)
            return
        # The whole head has arrived: from now on, if it shows the token, the
        # connection is not closed to make room (without it, it still may be).
        self._unauthorized = self._token_refusal(parsed.headers)
        if not self.server.begin_request(self.connection, with_token=self._unauthorized is None):
            return  # stopping, or closed to make room just now: nothing was done
        try:
            self._handle_head(parsed)
        finally:
            self.server.end_request(self.connection)

    def _handle_head(self, head: Head) -> None:
        """Answer the request whose head arrived (or refuse it)."""
        self.command, self.path, self.request_version = head.command, head.path, head.version
        self.headers = head.headers
        self.close_connection = not head.keep_alive
        self._expects_continue = head.expects_continue
        method = getattr(self, "do_" + self.command, None)
        if method is None:
            self.send_error(501, f"unsupported method {self.command!r}")
            return
        method()
        self.wfile.flush()

    def do_GET(self) -> None:
        self._body_read = False
        headers: dict[str, str] = {}
        try:
            status, payload = self._answer()
        except _Dropped:
            self.close_connection = True
            return
        except Refusal as r:
            status, payload = STATUS[r.code], error_json(r.code, r.message, field=r.field)
            headers = r.headers
        except FairqError as exc:
            code = error_code(exc)
            if code is None:
                status, payload = self._internal_error()
            else:
                status, payload = STATUS[code], queue_error_json(exc)
                if isinstance(exc, StoreError):  # the answer says what failed; the log says where
                    log.error("%s %s: %s", self.command, urlsplit(self.path).path, exc)
                if code == "busy":
                    headers = {"Retry-After": "1"}
        except Exception:
            status, payload = self._internal_error()
        if not self._body_read and ("Transfer-Encoding" in self.headers
                                    or self.headers.get("Content-Length", "0").strip() != "0"):
            self.close_connection = True  # the unread body would be taken for the next request
        if self.server.stopping:
            self.close_connection = True  # no next request on this connection
        self._send(status, payload, headers)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _internal_error(self) -> tuple[int, Any]:
        log.exception("internal error answering %s %s", self.command, urlsplit(self.path).path)
        return 500, error_json("internal", "internal error")

    def _answer(self) -> tuple[int, Any]:
        try:
            length = body_length(self.headers)
        except Refusal:
            self.close_connection = True  # where this request ends is unclear
            raise
        target = urlsplit(self.path)
        segments = target.path.split("/")[1:] if target.path.startswith("/") else []
        matches = [(r, captured) for r, captured in matching(segments)
                   if r.console or not self.server.console_only]
        if not any(r.public for r, _ in matches):
            self._authenticate()
        if not matches:
            raise Refusal("not_found", f"no endpoint {target.path}")
        chosen = next(((r, c) for r, c in matches if r.method == self.command), None)
        if chosen is None:
            allowed = ", ".join(sorted({r.method for r, _ in matches}))
            raise Refusal("method_not_allowed", f"{target.path} answers {allowed}", headers={"Allow": allowed})
        route, captured = chosen
        if self.server.read_only and route.method != "GET":
            raise Refusal("forbidden", f"this server is read-only: {route.method} {target.path} is refused")
        request = Request(path=_decode_path(captured), query=_parse_query(target.query),
                          body=self._body(route, length),
                          edge=Edge(read_only=self.server.read_only, rates=self.server.rates))
        self.server.calling(self.connection)
        return route.endpoint(self.server.queue, request)

    def _authenticate(self) -> None:
        if self._unauthorized is not None:  # judged once, when the head arrived
            raise self._unauthorized

    def _token_refusal(self, headers: Headers) -> Refusal | None:
        """Why a request with these headers may not use the API, or None if it may."""
        digest = self.server.token_digest
        if digest is None:
            host = headers.get("Host")
            if host is not None and not is_loopback(_hostname(host)):
                return Refusal("forbidden", "without a token, only requests to a loopback host are served")
            return None
        challenge = {"WWW-Authenticate": 'Bearer realm="fairq"'}
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Refusal("unauthorized", "an Authorization: Bearer token is required", headers=challenge)
        if not hmac.compare_digest(digest_of(token.strip().encode("latin-1")), digest):
            return Refusal("unauthorized", "the token is not accepted", headers=challenge)
        return None

    def _body(self, route: Route, length: int | None) -> dict[str, Any]:
        if route.method not in _BODY_METHODS:
            if length:
                raise Refusal("invalid_input", f"a {route.method} request takes no body", field="request")
            return {}
        if length is None:
            raise Refusal("length_required", "send Content-Length with the body (a JSON object; {} for none)")
        limit = self.server.max_request_bytes
        if length > limit:
            # The limit met next is the queue's own, on each event body: name both.
            body_limit = self.server.queue.max_body_bytes
            raise Refusal("too_large", f"the request body is {length} bytes, over the limit of {limit} "
                                       f"(fairq serve --max-request-bytes); beyond it, each event body must "
                                       f"also fit the queue's max_body_bytes ({body_limit} bytes of canonical JSON)")
        if not is_json_type(self.headers.get("Content-Type")):
            raise Refusal("unsupported_media_type",
                          "send Content-Type: application/json (UTF-8, with an optional charset=utf-8)")
        if self._expects_continue:  # said only now that the request is accepted, not on arrival
            self.send_response_only(HTTPStatus.CONTINUE)
            self.end_headers()
        self._reader.start(self.server.body_timeout)
        try:
            raw = self.rfile.read(length)
        except TimeoutError:  # the connection is closed after the answer: its body was not read
            raise Refusal("request_timeout", f"the request body did not arrive within "
                          f"{self.server.body_timeout:g} s") from None
        except OSError as exc:
            raise _Dropped from exc
        if len(raw) < length:
            raise _Dropped
        self._body_read = True
        try:
            data = loads_strict(raw.decode("utf-8"))
        except (StrictJSONError, UnicodeDecodeError) as exc:
            raise Refusal("invalid_json", f"the body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise Refusal("invalid_json", "the body must be a JSON object")
        return data

    def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        content_type = "application/json"
        if isinstance(payload, Text):
            body, content_type = payload.text.encode("utf-8"), payload.content_type
            headers = {**payload.headers, **headers}
        else:
            body = b"" if payload is None else canonical(payload).encode("utf-8")
        self.connection.settimeout(self.server.send_timeout)  # the whole answer's deadline (sendall)
        if log.isEnabledFor(logging.DEBUG):
            self.log_request(status, len(body))
        if self.request_version == "HTTP/0.9":  # no head at all, as http.server answers it
            if body:
                self.wfile.write(body)
            return
        # The head built at once (what send_response and send_header would add
        # one line at a time), and head and body leave in one write.
        lines = [f"{self.protocol_version} {status} {_phrase(status)}", "Server: fairq", f"Date: {_date()}"]
        if status != 204:
            lines += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        lines += ["Cache-Control: no-store", "X-Content-Type-Options: nosniff"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if self.close_connection:
            lines.append("Connection: close")
        lines.append("\r\n")
        self.wfile.write("\r\n".join(lines).encode("latin-1") + body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line, huge headers), as JSON."""
        self.close_connection = True
        self._send(code, error_json(_PROTOCOL_ERRORS.get(code, "bad_request"),
                                    message or HTTPStatus(code).phrase), {})

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):  # every answer passes here: format only when it is kept
            log.debug("http %s %s", self.address_string(), format % args)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


# The Date header's text and the second it was made for: one formatting a second.
_dated: list[tuple[int, str]] = [(0, "")]


def _date() -> str:
    now = int(time.time())
    second, text = _dated[0]
    if second != now:
        text = email.utils.formatdate(now, usegmt=True)
        _dated[0] = (now, text)
    return text


def _hostname(host_header: str) -> str:
    """The name in a Host header ("[::1]:8765" -> "::1"); "" if it does not parse."""
    try:
        return urlsplit("//" + host_header).hostname or ""
    except ValueError:
        return ""


def _decode_path(captured: dict[str, str]) -> dict[str, str]:
    try:
        return {name: unquote(raw, errors="strict") for name, raw in captured.items()}
    except UnicodeDecodeError:
        raise InvalidInput(next(iter(captured)), "is not percent-encoded UTF-8") from None


def _parse_query(query: str) -> dict[str, list[str]]:
    if not query:
        return {}
    try:
        return parse_qs(query, keep_blank_values=True, errors="strict", max_num_fields=_MAX_QUERY_FIELDS)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("query", f"is not a valid query string of at most {_MAX_QUERY_FIELDS} "
                           "percent-encoded UTF-8 fields") from None

