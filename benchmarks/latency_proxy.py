"""A TCP proxy on 127.0.0.1 that adds a fixed network delay, and counts round trips.

LatencyProxy(host, port, rtt_ms) listens on a free port of 127.0.0.1 and
forwards every connection to host:port, holding each chunk of bytes for half
of rtt_ms in each direction, so a request and its answer together take rtt_ms
longer than over loopback (plus the proxy's own overhead, which rtt() shows).
Order is kept per direction; TCP_NODELAY is set on every socket.

It also counts, over all its connections:
  turns       a client sending again after the server has answered: one
              network round trip of a request/answer protocol;
  statements  (with count_statements=True) the PostgreSQL frontend messages
              that run a statement: Query ('Q') and Execute ('E'), with
              their SQL text (the Parse before a prepared Execute names it).
Statements can be parsed only in clear text: via_proxy() asks libpq for
sslmode=disable and gssencmode=disable.

Standard library only (threads: time.sleep is precise to ~0.1 ms where an
epoll-based event loop rounds its timeouts up to whole milliseconds).
"""

from __future__ import annotations

import queue
import socket
import statistics
import struct
import threading
import time
import urllib.parse
from typing import Any

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CHUNK = 65536


class LatencyProxy:
    """A delaying, counting proxy for one server; a context manager."""

    def __init__(self, host: str, port: int, rtt_ms: float, *, count_statements: bool = False) -> None:
        self.target = (host, port)
        self.delay = rtt_ms / 2000.0  # seconds, each direction
        self._slack = _sleep_overshoot(self.delay)  # slept off in advance, so a chunk is held about `delay`
        self.rtt_ms = rtt_ms
        self.count_statements = count_statements
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.turns = 0
        self.statements: list[str] = []
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def __enter__(self) -> LatencyProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                _quietly_close(s)

    def via_proxy(self, url: str) -> str:
        """`url` with its host and port replaced by this proxy's, in clear text."""
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        where = f"127.0.0.1:{self.port}"
        query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k not in ("sslmode", "gssencmode")]
        query += [("sslmode", "disable"), ("gssencmode", "disable")]
        return urllib.parse.urlunsplit(parts._replace(
            netloc=f"{netloc[0]}@{where}" if len(netloc) == 2 else where, query=urllib.parse.urlencode(query)))

    def counts(self) -> tuple[int, int]:
        """(turns, statements) so far."""
        with self._lock:
            return self.turns, len(self.statements)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                _quietly_close(client)
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, server]
            _Link(self, client, server)


class _Link:
    """One proxied connection: a pump each way, and whether the server has answered."""

    def __init__(self, proxy: LatencyProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.answered = True  # the first client bytes start a turn
        self.parser = _FrontendParser(proxy) if proxy.count_statements else None
        _pump(self, client, server, upstream=True)
        _pump(self, server, client, upstream=False)

    def seen(self, data: bytes, upstream: bool) -> None:
        if not upstream:
            self.answered = True  # set before the answer is passed on: the client's next request sees it
            return
        if self.answered:
            self.answered = False
            with self.proxy._lock:
                self.proxy.turns += 1
        if self.parser is not None:
            self.parser.feed(data)


def _pump(link: _Link, src: socket.socket, dst: socket.socket, *, upstream: bool) -> None:
    delay = link.proxy.delay
    held: queue.SimpleQueue[tuple[float, bytes] | None] = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                if delay > 0:
                    held.put(None)  # the writer closes both ends after what it still holds
                else:
                    _quietly_close(dst)
                    _quietly_close(src)
                return
            link.seen(data, upstream)
            if delay <= 0:
                if not _send(dst, data):
                    return
            else:
                held.put((time.monotonic() + delay, data))

    def write() -> None:
        while True:
            item = held.get()
            if item is None:
                break
            due, data = item
            wait = due - time.monotonic() - link.proxy._slack
            if wait > 0:
                time.sleep(wait)
            if not _send(dst, data):
                break
        _quietly_close(dst)
        _quietly_close(src)

    threading.Thread(target=read, daemon=True).start()
    if delay > 0:
        threading.Thread(target=write, daemon=True).start()


def _sleep_overshoot(delay: float) -> float:
    """How much longer than asked time.sleep(delay) takes here (median of 40), at most half of delay."""
    if delay <= 0:
        return 0.0
    late = []
    for _ in range(40):
        began = time.monotonic()
        time.sleep(delay)
        late.append(time.monotonic() - began - delay)
    return min(max(0.0, statistics.median(late)), delay / 2)


def _send(dst: socket.socket, data: bytes) -> bool:
    try:
        dst.sendall(data)
        return True
    except OSError:
        return False


def _quietly_close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


class _FrontendParser:
    """Splits the client's byte stream into PostgreSQL frontend messages."""

    def __init__(self, proxy: LatencyProxy) -> None:
        self.proxy = proxy
        self.buffer = b""
        self.startup = True  # the startup packet (and an SSL/GSS request) carry no type byte
        self.prepared: dict[bytes, str] = {}  # statement name -> SQL
        self.bound = ""  # the SQL of the statement last bound

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if self.startup:
                if len(self.buffer) < 8:
                    return
                (length,) = struct.unpack("!I", self.buffer[:4])
                if len(self.buffer) < length:
                    return
                (code,) = struct.unpack("!I", self.buffer[4:8])
                self.buffer = self.buffer[length:]
                self.startup = code in (_SSL_REQUEST, _GSSENC_REQUEST)
                continue
            if len(self.buffer) < 5:
                return
            kind = self.buffer[:1]
            (length,) = struct.unpack("!I", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            body = self.buffer[5:1 + length]
            self.buffer = self.buffer[1 + length:]
            self._message(kind, body)

    def _message(self, kind: bytes, body: bytes) -> None:
        if kind == b"Q":
            self._ran(body.rstrip(b"\0").decode(errors="replace"))
        elif kind == b"P":
            name, rest = body.split(b"\0", 1)
            self.prepared[name] = rest.split(b"\0", 1)[0].decode(errors="replace")
            self.bound = self.prepared[name]
        elif kind == b"B":
            _portal, rest = body.split(b"\0", 1)
            self.bound = self.prepared.get(rest.split(b"\0", 1)[0], "?")
        elif kind == b"E":
            self._ran(self.bound)

    def _ran(self, sql: str) -> None:
        with self.proxy._lock:
            self.proxy.statements.append(" ".join(sql.split()))


def select1_ms(url: str, rounds: int = 200) -> dict[str, float]:
    """Median and p90 ms of `SELECT 1` on one autocommit connection (after a warm-up)."""
    import psycopg

    times = []
    with psycopg.connect(url, autocommit=True) as conn:
        for i in range(rounds + 20):
            began = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            if i >= 20:
                times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return {"median_ms": statistics.median(times), "p90_ms": times[int(len(times) * 0.9)]}


def describe(stats: dict[str, Any]) -> str:
    return f"{stats['median_ms']:.3f} ms median, {stats['p90_ms']:.3f} ms p90"
