"""The HTTP edge of `fairq serve`: tokens, limits, routing, JSON in and out.

It checks, in this order: the bearer token (every route but /healthz), the
route and method, the body's framing (a Content-Length, no chunking, at most
`max_request_bytes`, checked before reading), its content type (JSON) and
that it parses as one JSON object. Then it makes exactly one Queue call
through the endpoint (fairq.http.routes) and answers with its JSON form
(fairq.http.wire), or with the Text the endpoint gives (GET /metrics).
Every refusal is a JSON body with a machine code; an unexpected error
answers only "internal error" and logs the traceback to the "fairq"
logger. Threads share one Queue, whose calls take turns on one connection,
so each request is one transaction.

Each connection has its own thread, at most `max_connections` at once; a
connection over the cap waits to be accepted until a thread is free.
`server_close()` (after `shutdown()`) lets the requests in flight finish and
returns only when every connection thread has ended, so the Queue can be
closed after it without pulling the connection from under a call.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .. import _validate as v
from .._json import StrictJSONError, canonical, loads_strict
from ..errors import FairqError, InvalidInput
from ..queue import Queue
from .routes import ROUTES, Refusal, Request, Route, Text
from .wire import STATUS, error_code, error_json, queue_error_json

__all__ = ["Server", "is_loopback", "DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_MAX_REQUEST_BYTES",
           "DEFAULT_MAX_CONNECTIONS", "DEFAULT_DRAIN_SECONDS"]

log = logging.getLogger("fairq")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_REQUEST_BYTES = 1 << 20
#: Connections served at once, each on its own thread; more wait to be accepted.
DEFAULT_MAX_CONNECTIONS = 64
#: Seconds a stopping server waits for requests in flight (under `docker stop`'s 10 s).
DEFAULT_DRAIN_SECONDS = 5.0
#: A client that sends nothing for this long loses its connection (and thread).
SOCKET_TIMEOUT = 30.0
_MAX_QUERY_FIELDS = 20
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# What http.server itself refuses (bad request line, oversize headers, unknown method).
_PROTOCOL_ERRORS = {414: "too_large", 431: "too_large", 501: "not_implemented"}


def is_loopback(host: str) -> bool:
    """Is `host` "localhost" or a loopback address literal (127.0.0.0/8, ::1)?"""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Server(ThreadingHTTPServer):
    """The HTTP server in front of one Queue; `serve_forever()` runs it.

    token: the bearer token every request but GET /healthz must carry. None
    turns authentication off, which is allowed only on a loopback host (and
    then only requests addressed to a loopback name are served, against DNS
    rebinding). max_request_bytes: the largest request body. port=0 picks a
    free port; `url` says which. max_connections: connections served at
    once, each on its own thread; one over the cap waits in the listen queue
    until a thread is free (an idle keep-alive connection keeps its thread
    for up to 30 s). drain_seconds: after `shutdown()`, how long
    `server_close()` lets requests in flight finish before it drops their
    connections; a request whose Queue call has begun is always finished
    and answered.
    """

    daemon_threads = True  # tracked in self._open instead; server_close waits for them
    request_queue_size = 128  # connections waiting for a thread

    def __init__(self, queue: Queue, *, token: str | None, host: str = DEFAULT_HOST,
                 port: int = DEFAULT_PORT, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 drain_seconds: float = DEFAULT_DRAIN_SECONDS) -> None:
        if token is None and not is_loopback(host):
            raise InvalidInput("token", f"is required to listen on {host!r}; "
                               "only a loopback address may be served without one")
        if token is not None and (not token or not all("!" <= ch <= "~" for ch in token)):
            raise InvalidInput("token", "must be non-empty printable ASCII without spaces")
        self.queue = queue
        self.max_request_bytes = v.count(max_request_bytes, "max_request_bytes", low=64, high=1 << 30)
        self.max_connections = v.count(max_connections, "max_connections", low=1, high=10_000)
        self.drain_seconds = v.seconds(drain_seconds, "drain_seconds")
        self.token_digest = None if token is None else _digest(token.encode("ascii"))
        # Connections with a thread; those of them answering a request, each
        # mapped to whether its Queue call has begun. `_changed` is notified
        # whenever either shrinks or the server stops.
        self._open: set[socket.socket] = set()
        self._busy: dict[socket.socket, bool] = {}
        self._changed = threading.Condition()
        self._stopping = False
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host.strip("[]"), port), _Handler)

    @property
    def url(self) -> str:
        """The base URL the server listens on, e.g. http://127.0.0.1:8765."""
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def connections(self) -> int:
        """Connections open now, each with its thread (at most max_connections)."""
        return len(self._open)

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        return len(self._busy)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a new thread once fewer than max_connections are open."""
        with self._changed:
            while len(self._open) >= self.max_connections and not self._stopping:
                self._changed.wait()
            if self._stopping:
                self.shutdown_request(request)
                return
            self._open.add(request)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """The connection's thread: its requests, then its place freed."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._changed:
                self._open.discard(request)
                self._busy.pop(request, None)
                self._changed.notify_all()

    def _begin_request(self, connection: socket.socket) -> bool:
        """Mark the connection as answering a request; False once the server is stopping."""
        with self._changed:
            if self._stopping:
                return False
            self._busy[connection] = False
            return True

    def _calling(self, connection: socket.socket) -> None:
        """The request's Queue call begins: from now on it is finished and answered, even past the drain."""
        with self._changed:
            self._busy[connection] = True

    def _end_request(self, connection: socket.socket) -> None:
        """The request on this connection is answered."""
        with self._changed:
            self._busy.pop(connection, None)
            self._changed.notify_all()

    def shutdown(self) -> None:
        """Stop accepting connections and make serve_forever() return (call it from another thread)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        super().shutdown()

    def server_close(self) -> None:
        """Stop listening and drain: close idle connections at once, give requests in
        flight drain_seconds to finish, then drop those whose Queue call has not
        begun (a stalled client); returns when every connection thread has ended."""
        super().server_close()
        deadline = time.monotonic() + self.drain_seconds
        with self._changed:
            self._stopping = True
            for connection in self._open - self._busy.keys():
                _hang_up(connection, socket.SHUT_RD)  # wakes a thread waiting for the next request
            while self._busy and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            for connection in self._open:
                if not self._busy.get(connection):
                    _hang_up(connection, socket.SHUT_RDWR)  # wakes a thread blocked on a stalled client
            while self._open:  # a request whose Queue call has begun is finished and answered
                self._changed.wait()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection broke outside a request (the client went away): log it quietly."""
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


def _hang_up(connection: socket.socket, how: int) -> None:
    """Shut the connection down so a thread blocked on it wakes; it may be gone already."""
    try:
        connection.shutdown(how)
    except OSError:
        pass


def _digest(token: bytes) -> bytes:
    # Comparing fixed-length digests keeps the comparison's time independent of
    # both the content and the length of the token.
    return hashlib.sha256(token).digest()


class _Dropped(Exception):
    """The client stopped sending mid-request; there is no one to answer."""


class _Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    server_version = "fairq"
    sys_version = ""
    timeout = SOCKET_TIMEOUT
    # Headers and body leave in two writes; without TCP_NODELAY a keep-alive
    # client's delayed ACK stalls the second one for tens of milliseconds.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        if not self.server._begin_request(self.connection):
            self.close_connection = True  # stopping: dropped unanswered, before anything was done
            return
        try:
            self._handle()
        finally:
            self.server._end_request(self.connection)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
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
                if code == "busy":
                    headers = {"Retry-After": "1"}
        except Exception:
            status, payload = self._internal_error()
        if not self._body_read and ("Transfer-Encoding" in self.headers
                                    or self.headers.get("Content-Length", "0") != "0"):
            self.close_connection = True  # the unread body would be taken for the next request
        if self.server._stopping:
            self.close_connection = True  # no next request on this connection
        self._send(status, payload, headers)

    def _internal_error(self) -> tuple[int, Any]:
        log.exception("internal error answering %s %s", self.command, urlsplit(self.path).path)
        return 500, error_json("internal", "internal error")

    def _answer(self) -> tuple[int, Any]:
        target = urlsplit(self.path)
        segments = target.path.split("/")[1:] if target.path.startswith("/") else []
        matches = [(r, captured) for r in ROUTES if (captured := r.match(segments)) is not None]
        if not any(r.public for r, _ in matches):
            self._authenticate()
        if not matches:
            raise Refusal("not_found", f"no endpoint {target.path}")
        chosen = next(((r, c) for r, c in matches if r.method == self.command), None)
        if chosen is None:
            allowed = ", ".join(sorted({r.method for r, _ in matches}))
            raise Refusal("method_not_allowed", f"{target.path} answers {allowed}", headers={"Allow": allowed})
        route, captured = chosen
        request = Request(path=_decode_path(captured), query=_parse_query(target.query), body=self._body(route))
        self.server._calling(self.connection)
        return route.endpoint(self.server.queue, request)

    def _authenticate(self) -> None:
        digest = self.server.token_digest
        if digest is None:
            host = self.headers.get("Host")
            if host is not None and not is_loopback(_hostname(host)):
                raise Refusal("forbidden", "without a token, only requests to a loopback host are served")
            return
        challenge = {"WWW-Authenticate": 'Bearer realm="fairq"'}
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refusal("unauthorized", "an Authorization: Bearer token is required", headers=challenge)
        if not hmac.compare_digest(_digest(token.strip().encode("latin-1")), digest):
            raise Refusal("unauthorized", "the token is not accepted", headers=challenge)

    def _body(self, route: Route) -> dict[str, Any]:
        chunked = "Transfer-Encoding" in self.headers
        length = self.headers.get("Content-Length")
        if route.method not in _BODY_METHODS:
            if chunked or length not in (None, "0"):
                raise Refusal("invalid_input", f"a {route.method} request takes no body", field="request")
            return {}
        if chunked or length is None:
            raise Refusal("length_required", "send the body with a Content-Length (chunked bodies are refused)")
        if not (length.isascii() and length.isdigit()):
            raise Refusal("invalid_input", f"Content-Length {length!r} is not a number", field="Content-Length")
        size = int(length)
        limit = self.server.max_request_bytes
        if size > limit:
            raise Refusal("too_large", f"the request body is {size} bytes, over the limit of {limit}")
        if self.headers.get_content_type() != "application/json" or \
                self.headers.get_param("charset", "utf-8").lower() not in ("utf-8", "utf8"):
            raise Refusal("unsupported_media_type", "the body must be Content-Type: application/json (UTF-8)")
        try:
            raw = self.rfile.read(size)
        except OSError as exc:
            raise _Dropped from exc
        if len(raw) < size:
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
        else:
            body = b"" if payload is None else canonical(payload).encode("utf-8")
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line, huge headers), as JSON."""
        self.close_connection = True
        self._send(code, error_json(_PROTOCOL_ERRORS.get(code, "bad_request"),
                                    message or HTTPStatus(code).phrase), {})

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s %s", self.address_string(), format % args)


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
    try:
        return parse_qs(query, keep_blank_values=True, errors="strict", max_num_fields=_MAX_QUERY_FIELDS)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("query", f"is not a valid query string of at most {_MAX_QUERY_FIELDS} "
                           "percent-encoded UTF-8 fields") from None

