"""What a request handler (fairq.http.handler) needs of the server it answers
for, as a Protocol: its limits and deadlines, its token, its Queue, and the
bookkeeping of requests begun and ended. fairq.http.server's Server is one;
the handler imports this module, not the server, so the two do not import
each other.
"""

from __future__ import annotations

import socket
from typing import Any, Protocol

from ..api.queue import Queue

__all__ = ["Serving"]


class Serving(Protocol):
    """The server a Handler answers for (fairq.http.server.Server)."""

    queue: Queue
    head_timeout: float
    body_timeout: float
    send_timeout: float
    max_request_bytes: int
    token_digest: bytes | None
    read_only: bool
    console_only: bool
    rates: Any  # fairq.http.rates.Rates, or None: not sampling

    @property
    def stopping(self) -> bool:
        """Has shutdown() or server_close() begun (no next request on a connection)?"""

    def begin_request(self, connection: socket.socket, *, with_token: bool) -> bool:
        """A request's whole head arrived; False: do not answer it (closed to make room, or stopping)."""

    def calling(self, connection: socket.socket) -> None:
        """The request's Queue call begins."""

    def end_request(self, connection: socket.socket) -> None:
        """The request on this connection is answered."""
