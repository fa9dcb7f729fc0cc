"""The HTTP edge of `fairq serve`: tokens, limits, routing, JSON in and out.

It reads each request head under a deadline and checks its lines
(fairq.http.framing), then, in this order: the body's framing (at most one
Content-Length, no Transfer-Encoding), the bearer token (every route but
/healthz), the route and method, the body's size (at most
`max_request_bytes`, checked before reading), its content type (JSON), and
that it arrives within its deadline and parses as one JSON object. Then it
makes exactly one Queue call through the endpoint (fairq.http.routes) and
answers with its JSON form (fairq.http.wire), or with the Text the endpoint
gives (GET /metrics). Every refusal is a JSON body with a machine code; an
unexpected error answers only "internal error" and logs the traceback to
the "fairq" logger. Threads share one Queue, whose calls take turns on one
connection, so each request is one call; calls of requests that arrive
together share one COMMIT (fairq.stores.sqlite.group), and each is answered after it.

Each connection has its own thread, at most `max_connections` at once. A
connection waiting for a request head (new, or idle between requests) has
not shown a token, and neither has one being answered a request without
the token (a console file, /healthz, a 401): when every thread is taken,
the one of those that has waited longest is closed to make room for a new
connection, even in the middle of an answer, so clients that trickle
their heads, or pipeline requests and never read the answers, cannot lock
out those with a token. Every answer must be taken within `send_timeout`,
or its connection is closed. Only when every thread is answering a
request with the token does a new connection wait to be accepted.
`server_close()` (after `shutdown()`) lets the requests in flight finish and
returns only when every connection thread has ended, so the Queue can be
closed after it without pulling the connection from under a call.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from .. import _validate as v
from ..errors import InvalidInput
from ..api.queue import Queue
from .handler import Handler, digest_of, is_loopback
from .rates import DEFAULT_SAMPLE_SECONDS, Rates
from .ticker import DEFAULT_TICK_SECONDS, Ticker

if TYPE_CHECKING:
    from .serving import Serving

__all__ = ["Server", "is_loopback", "check_settings", "DEFAULT_TICK_SECONDS", "DEFAULT_SAMPLE_SECONDS", "DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_MAX_REQUEST_BYTES",
           "DEFAULT_MAX_CONNECTIONS", "DEFAULT_DRAIN_SECONDS", "DEFAULT_HEAD_TIMEOUT",
           "DEFAULT_BODY_TIMEOUT", "DEFAULT_SEND_TIMEOUT"]

log = logging.getLogger("fairq")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_REQUEST_BYTES = 1 << 20
#: Connections served at once, each on its own thread.
DEFAULT_MAX_CONNECTIONS = 64
#: Seconds a stopping server waits for requests in flight (under `docker stop`'s 10 s).
DEFAULT_DRAIN_SECONDS = 5.0
#: Seconds a connection has to deliver a request's line and headers, from when it
#: is accepted or its previous answer was sent (so also an idle keep-alive's limit).
DEFAULT_HEAD_TIMEOUT = 5.0
#: Seconds a request has to deliver its body, once its head is accepted.
DEFAULT_BODY_TIMEOUT = 30.0
#: Seconds an answer has to be taken by the client, from its first byte to its last.
DEFAULT_SEND_TIMEOUT = 10.0


class Server(ThreadingHTTPServer):
    """The HTTP server in front of one Queue; `serve_forever()` runs it.

    token: the bearer token every request but GET /healthz must carry. None
    turns authentication off, which is allowed only on a loopback host (and
    then only requests addressed to a loopback name are served, against DNS
    rebinding). max_request_bytes: the largest request body. port=0 picks a
    free port; `url` says which. max_connections: connections served at
    once, each on its own thread; when all are taken, the one that has waited
    longest for a request head, or that is being answered without having
    shown the token, is closed to make room; only when every one is
    answering a request that showed the token does a new connection wait
    in the listen queue. head_timeout: seconds a connection has to deliver a request's
    line and headers, from being accepted or answered (else 408, or closed
    if it sent nothing); body_timeout: seconds for the body, after the head
    (else 408); send_timeout: seconds the client has to take a whole
    answer (else the connection is closed). drain_seconds: after `shutdown()`, how long
    `server_close()` lets requests in flight finish before it drops their
    connections; a request whose Queue call has begun is always finished
    and answered. tick_seconds: tick the queue's schedules this often while
    serving (None, the default here: do not; `fairq serve` ticks every 1 s).
    read_only: refuse every request but GET (403 `forbidden`), so neither a
    worker nor the console changes anything; a read-only server does not
    tick. console_only: serve only the console's files and the endpoints it
    uses (`fairq ui`); the others answer 404. sample_seconds: sample the
    claimed and acked totals this often for GET /v1/rates (None: do not).
    """

    daemon_threads = True  # tracked in self._open instead; server_close waits for them
    request_queue_size = 128  # connections waiting for a thread

    def __init__(self, queue: Queue, *, token: str | None, host: str = DEFAULT_HOST,
                 port: int = DEFAULT_PORT, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 drain_seconds: float = DEFAULT_DRAIN_SECONDS, head_timeout: float = DEFAULT_HEAD_TIMEOUT,
                 body_timeout: float = DEFAULT_BODY_TIMEOUT, tick_seconds: float | None = None,
                 read_only: bool = False, console_only: bool = False,
                 sample_seconds: float | None = None, send_timeout: float = DEFAULT_SEND_TIMEOUT) -> None:
        check_settings(token=token, host=host, port=port, max_request_bytes=max_request_bytes,
                       max_connections=max_connections, drain_seconds=drain_seconds, head_timeout=head_timeout,
                       body_timeout=body_timeout, tick_seconds=tick_seconds, read_only=read_only,
                       console_only=console_only, sample_seconds=sample_seconds, send_timeout=send_timeout)
        self.queue = queue
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.drain_seconds = drain_seconds
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.send_timeout = send_timeout
        self.token_digest = None if token is None else digest_of(token.encode("ascii"))
        #: The schedule ticker (None: this server does not tick); runs while serve_forever() does.
        self.ticker = None if tick_seconds is None or read_only else Ticker(queue, tick_seconds)
        self.read_only = read_only
        self.console_only = console_only
        #: The claims/acks sampler for GET /v1/rates (None: not sampling); runs while serve_forever() does.
        self.rates = None if sample_seconds is None else Rates(queue, sample_seconds)
        # Connections with a thread; those of them that may be closed to make
        # room (waiting for a request head, or answering one that showed no
        # token), longest-waiting first; those answering a request that
        # showed the token, each mapped to whether its Queue call has begun; those closed to make room whose
        # thread has not ended yet. `_changed` is notified whenever any of
        # them shrinks or the server stops.
        self._open: set[socket.socket] = set()
        self._waiting: dict[socket.socket, None] = {}
        self._busy: dict[socket.socket, bool] = {}
        self._evicted: set[socket.socket] = set()
        #: Connections closed to make room since the server started.
        self.evictions = 0
        self._changed = threading.Condition()
        self._stopping = False
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host.strip("[]"), port), Handler)

    @property
    def url(self) -> str:
        """The base URL the server listens on, e.g. http://127.0.0.1:8765."""
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def stopping(self) -> bool:
        """Has shutdown() or server_close() begun? No connection is then given a next request."""
        return self._stopping

    @property
    def connections(self) -> int:
        """Connections open now, each with its thread (at most max_connections)."""
        return len(self._open)

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        return len(self._busy)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Answer requests, and tick schedules if asked to, until shutdown()."""
        helpers = [h for h in (self.ticker, self.rates) if h is not None]
        for helper in helpers:
            helper.start()
        try:
            super().serve_forever(poll_interval)
        finally:
            for helper in helpers:
                helper.stop()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a new thread once fewer than max_connections are open,
        closing the one that has waited longest for a request head to make room."""
        with self._changed:
            while len(self._open) >= self.max_connections and not self._stopping:
                if self._waiting and not self._evicted:
                    oldest = next(iter(self._waiting))
                    del self._waiting[oldest]
                    self._evicted.add(oldest)
                    self.evictions += 1
                    _hang_up(oldest, socket.SHUT_RDWR)  # its thread reads the end and finishes
                self._changed.wait()
            if self._stopping:
                self.shutdown_request(request)
                return
            self._open.add(request)
            self._waiting[request] = None
        try:
            super().process_request(request, client_address)
        except Exception:  # no thread for it (e.g. the process may start no more): forget it, close it
            with self._changed:
                self._open.discard(request)
                self._waiting.pop(request, None)
                self._changed.notify_all()
            self.shutdown_request(request)
            log.warning("could not start a thread for a connection from %s; closed it", client_address,
                        exc_info=True)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """The connection's thread: its requests, then its place freed."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._changed:
                self._open.discard(request)
                self._waiting.pop(request, None)
                self._busy.pop(request, None)
                self._evicted.discard(request)
                self._changed.notify_all()

    def begin_request(self, connection: socket.socket, *, with_token: bool) -> bool:
        """A request's whole head has arrived: if it shows the token, mark the
        connection as answering it, no longer to be closed to make room; one
        without the token keeps its place in line, and may still be closed
        while it is answered. False if the connection was closed to make room
        already or the server is stopping."""
        with self._changed:
            if self._stopping or connection not in self._waiting:
                return False
            if with_token:
                del self._waiting[connection]
                self._busy[connection] = False
            return True

    def calling(self, connection: socket.socket) -> None:
        """The request's Queue call begins: from now on it is finished and answered, even past the drain."""
        with self._changed:
            if connection in self._busy:
                self._busy[connection] = True

    def end_request(self, connection: socket.socket) -> None:
        """The request on this connection is answered: one that showed the token
        waits for its next head, last in line; the others keep their place."""
        with self._changed:
            if self._busy.pop(connection, None) is not None:
                self._waiting[connection] = None
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


def check_settings(*, token: str | None, host: str, port: int, max_request_bytes: int, max_connections: int,
                   drain_seconds: float, head_timeout: float, body_timeout: float,
                   tick_seconds: float | None, read_only: bool = False, console_only: bool = False,
                   sample_seconds: float | None = None, send_timeout: float = DEFAULT_SEND_TIMEOUT) -> None:
    """Refuse, naming the field, what Server would refuse, before anything is opened."""
    if not isinstance(host, str) or not host:
        raise InvalidInput("host", "must be a host name or an address")
    if token is None and not is_loopback(host):
        raise InvalidInput("token", f"is required to listen on {host!r}; "
                           "only a loopback address may be served without one")
    if token is not None and (not isinstance(token, str) or not token
                              or not all("!" <= ch <= "~" for ch in token)):
        raise InvalidInput("token", "must be non-empty printable ASCII without spaces")
    v.count(port, "port", low=0, high=65535)
    v.count(max_request_bytes, "max_request_bytes", low=64, high=1 << 30)
    v.count(max_connections, "max_connections", low=1, high=10_000)
    v.seconds(drain_seconds, "drain_seconds")
    v.seconds(head_timeout, "head_timeout", positive=True)
    v.seconds(body_timeout, "body_timeout", positive=True)
    v.seconds(send_timeout, "send_timeout", positive=True)
    if tick_seconds is not None:
        v.seconds(tick_seconds, "tick_seconds", positive=True)
    if sample_seconds is not None:
        v.seconds(sample_seconds, "sample_seconds", positive=True)
    for name, flag in (("read_only", read_only), ("console_only", console_only)):
        if not isinstance(flag, bool):
            raise InvalidInput(name, f"must be a bool, not {type(flag).__name__}")


def _hang_up(connection: socket.socket, how: int) -> None:
    """Shut the connection down so a thread blocked on it wakes; it may be gone already."""
    try:
        connection.shutdown(how)
    except OSError:
        pass


if TYPE_CHECKING:  # a Server is what its Handler answers for (mypy checks it here)
    _serving: type[Serving] = Server
