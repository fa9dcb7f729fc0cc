"""One persistent HTTP/1.1 connection per thread for fairq.Client.

`Connections.exchange()` sends one request on the calling thread's
connection and returns the answer's status and body, opening the
connection when there is none. A connection the server has closed while it
sat idle (it was closed to make room, or its idle time ran out) shows up as
readable before anything is sent: it is dropped and a new one opened, and
only then is the request sent. Once a request's first byte may have left,
it is never sent again: any failure from there on closes the connection
and raises, and the caller cannot know whether the call took effect.
Standard library only (http.client); no proxies, no redirects. No fairq
errors here: the caller (fairq.http.client) turns failures into them.
"""

from __future__ import annotations

import http.client
import os
import select
import threading
import weakref
from typing import Any

__all__ = ["Connections"]


class _Line:
    """A thread's connection, closed when the thread (and so this object) goes away."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.pid = os.getpid()  # a forked child must not share its parent's socket

    def close(self) -> None:
        self.conn.close()

    def __del__(self) -> None:
        if self.pid == os.getpid():
            self.conn.close()


class Connections:
    """Persistent connections to one server, one per calling thread."""

    def __init__(self, scheme: str, host: str, port: int, timeout: float) -> None:
        self._factory = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        self._host, self._port, self._timeout = host, port, timeout
        self._local = threading.local()
        self._all: weakref.WeakSet[_Line] = weakref.WeakSet()
        self._lock = threading.Lock()
        #: Connections opened so far (a test's way to see they are kept).
        self.opened = 0

    def exchange(self, method: str, target: str, body: bytes | None,
                 headers: dict[str, str]) -> tuple[int, bytes]:
        """Send one request and read its whole answer: (status, body).

        Raises OSError or http.client.HTTPException when the server cannot
        be reached or the answer does not arrive; the request may then have
        taken effect, and it is not sent again.
        """
        line = self._line()
        try:
            line.conn.request(method, target, body=body, headers=headers)
            response = line.conn.getresponse()
            status, raw = response.status, response.read()
        except BaseException:
            line.close()  # its state is unknown: the next request opens a new one
            raise
        if response.will_close:
            line.close()
        return status, raw

    def close(self) -> None:
        """Close every connection; the next request opens a new one."""
        with self._lock:
            lines = list(self._all)
        for line in lines:
            line.close()

    def _line(self) -> _Line:
        """This thread's connection, ready to send: opened now if there is none, or if
        the server closed the one kept (it is readable while no answer is due)."""
        line: _Line | None = getattr(self._local, "line", None)
        if line is None or line.pid != os.getpid():
            line = _Line(self._factory(self._host, self._port, timeout=self._timeout))
            self._local.line = line
            with self._lock:
                self._all.add(line)
        sock = line.conn.sock
        if sock is not None and _readable(sock):
            line.close()  # the server's end (or bytes no request asked for): never send on it
            sock = None
        if sock is None:
            line.conn.connect()
            with self._lock:
                self.opened += 1
        return line


def _readable(sock: Any) -> bool:
    """Does the socket have something to read (the server's close) right now?"""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])
