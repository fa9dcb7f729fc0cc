"""Reading a request off the socket under deadlines, and judging its framing.

A client gets a fixed time to deliver a request's line and headers, and
another for its body, however slowly it trickles them: the socket's own
timeout bounds only one read, so `DeadlineReader` sets it, before each
read, to what is left of the deadline. `read_head` reads the line and the
header lines itself, before http.server parses them, and refuses what
that parser would let through: a header line without a colon (the parser
would take it and every line after it as body), a folded (indented) line,
and a head over MAX_HEAD_BYTES or MAX_HEADERS lines. `body_length` judges
the body's framing from the parsed headers: at most one Content-Length,
digits only, and no Transfer-Encoding, so no two readers of the same bytes
(a proxy and this server) can disagree where the request ends.
`parse_head` splits a head `read_head` accepted into its method, target,
version and headers (what http.server's parser would give, without the
email parser's cost). `is_json_type` accepts exactly `application/json`,
optionally with a UTF-8 charset. No routes and no tokens here
(fairq.http.server).
"""

from __future__ import annotations

import io
import re
import socket
import time
from dataclasses import dataclass
from typing import Any

from .routes import Refusal

__all__ = ["DeadlineReader", "HeadRefused", "read_head", "Headers", "Head", "parse_head", "body_length",
           "is_json_type", "MAX_HEAD_BYTES", "MAX_HEADERS"]

#: The request line and headers together, in bytes.
MAX_HEAD_BYTES = 65536
#: Header lines in one request.
MAX_HEADERS = 100
# A header name is an RFC 9110 token.
_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# A header line with nothing to refuse: a name, its colon, a value without
# control characters (a tab is not one) and the line's ending. Any other line
# is judged piece by piece, to say what is wrong with it.
_GOOD_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[^\x00-\x08\x0a-\x1f\x7f]*\r?\n")
# application/json, optionally ; charset=utf-8 (quoted or not, any case), nothing else.
_JSON_TYPE = re.compile(r'\s*application/json\s*(;\s*charset\s*=\s*("?)utf-?8\2\s*)?', re.IGNORECASE)


class HeadRefused(Exception):
    """The request head is malformed or too large: answer `status` and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read allowed only what is left of the current deadline.

    `start(seconds)` sets a new deadline and counts bytes from zero; a read
    after it has passed, or one that waits past it, raises TimeoutError.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self._until = 0.0
        self.received = 0

    def start(self, seconds: float) -> None:
        """Bytes read from now on must all arrive within `seconds`."""
        self._until = time.monotonic() + seconds
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._until - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self._sock.settimeout(left)
        n = self._sock.recv_into(buffer)
        self.received += n
        return n


# Control characters a request line or header line may not hold (tab may).
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def _content(line: bytes) -> bytes:
    """A line without its ending (CRLF, or a lone LF)."""
    return line[:-2] if line.endswith(b"\r\n") else line[:-1]


def read_head(rfile: io.BufferedIOBase) -> tuple[bytes, bytes] | None:
    """The request line and the header block (ending with its empty line);
    None if the connection ends before a whole head arrived."""
    line = rfile.readline(MAX_HEAD_BYTES + 1)
    if line in (b"\r\n", b"\n"):  # one empty line before a request is ignored (RFC 9112, 2.2)
        line = rfile.readline(MAX_HEAD_BYTES + 1)
    if len(line) > MAX_HEAD_BYTES:
        raise HeadRefused(414, f"the request line is over {MAX_HEAD_BYTES} bytes")
    if not line.endswith(b"\n"):
        return None
    if _CONTROL.search(_content(line)):
        raise HeadRefused(400, "the request line holds a control character")
    size, lines = len(line), list[bytes]()
    while True:
        header = rfile.readline(MAX_HEAD_BYTES + 1 - size)
        size += len(header)
        if size > MAX_HEAD_BYTES:
            raise HeadRefused(431, f"the request head is over {MAX_HEAD_BYTES} bytes")
        if not header.endswith(b"\n"):
            return None
        if header in (b"\r\n", b"\n"):
            return line, b"".join(lines) + b"\r\n"
        if _GOOD_LINE.fullmatch(header) is None:
            _refuse_header(header)
        lines.append(header)
        if len(lines) > MAX_HEADERS:
            raise HeadRefused(431, f"the request has more than {MAX_HEADERS} header lines")


def _refuse_header(header: bytes) -> None:
    """Refuse a header line that is not `name: value` (saying what is wrong with it)."""
    if header[:1] in (b" ", b"\t"):
        raise HeadRefused(400, "a header line is folded (starts with white space)")
    if _CONTROL.search(_content(header)):
        # A bare CR (or NUL, ...) inside a line: a proxy and this parser
        # could split the head differently (request smuggling).
        raise HeadRefused(400, "a header line holds a control character (a bare CR, NUL, ...)")
    name, colon, _ = header.partition(b":")
    if not colon:
        raise HeadRefused(400, "a header line has no colon")
    if not _NAME.fullmatch(name):
        raise HeadRefused(400, "a header name is empty or holds a character a name cannot")


class Headers:
    """A request's header fields in order; names compare without regard to case."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields
        self._first: dict[str, str] = {}
        for name, value in fields:
            self._first.setdefault(name.lower(), value)

    def get(self, name: str, default: Any = None) -> Any:
        """The first field's value named `name`, else `default`."""
        return self._first.get(name.lower(), default)

    def get_all(self, name: str) -> list[str] | None:
        """Every value named `name`, in order; None if there is none."""
        key = name.lower()
        return [value for n, value in self._fields if n.lower() == key] or None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)


@dataclass(frozen=True)
class Head:
    """A request line and its headers, parsed."""

    command: str
    path: str
    version: str  # "HTTP/1.1", "HTTP/1.0" (or "HTTP/0.9" for a bare "GET /path")
    headers: Headers
    keep_alive: bool  # the client allows another request on this connection after this one
    expects_continue: bool  # Expect: 100-continue on an HTTP/1.1 request


def parse_head(requestline: bytes, header_block: bytes) -> Head:
    """The parts of a head `read_head` returned (so its header lines are well formed).

    Refuses (400) a request line that is not "METHOD TARGET HTTP/x.y" (or the
    old "GET TARGET"), and (505) HTTP/2 or later, as http.server does.
    """
    line = str(requestline, "iso-8859-1").rstrip("\r\n")
    words = line.split()
    version, keep_alive = "HTTP/0.9", False
    if len(words) >= 3:
        version = words[-1]
        number = version[5:].split(".") if version.startswith("HTTP/") else []
        if len(number) != 2 or not all(n.isdigit() and len(n) <= 10 for n in number):
            raise HeadRefused(400, f"Bad request version ({version!r})")
        major, minor = int(number[0]), int(number[1])
        if major >= 2:
            raise HeadRefused(505, f"Invalid HTTP version ({version[5:]})")
        keep_alive = (major, minor) >= (1, 1)
    if not 2 <= len(words) <= 3:
        raise HeadRefused(400, f"Bad request syntax ({line!r})")
    command, path = words[:2]
    if len(words) == 2 and command != "GET":
        raise HeadRefused(400, f"Bad HTTP/0.9 request type ({command!r})")
    if path.startswith("//"):
        path = "/" + path.lstrip("/")  # not taken for a scheme-relative URL
    fields = []
    for raw in str(header_block, "iso-8859-1").split("\n")[:-2]:  # the block ends with its empty line
        name, _, value = raw.partition(":")
        fields.append((name, value.lstrip(" \t").rstrip("\r")))
    headers = Headers(fields)
    connection = headers.get("Connection", "").lower()
    if connection == "close":
        keep_alive = False
    elif connection == "keep-alive" and len(words) == 3:
        keep_alive = True
    expects = headers.get("Expect", "").lower() == "100-continue" and version >= "HTTP/1.1"
    return Head(command, path, version, headers, keep_alive, expects)


def body_length(headers: Headers) -> int | None:
    """The body's length from its one Content-Length (None: no body framing given).

    Refuses what could frame the body two ways: two Content-Length headers
    (equal or not), Transfer-Encoding (chunked bodies are not read), or a
    length that is not plain digits.
    """
    lengths = headers.get_all("Content-Length") or []
    if "Transfer-Encoding" in headers:
        if lengths:
            raise Refusal("bad_request", "a request cannot have both Transfer-Encoding and Content-Length")
        raise Refusal("length_required", "send Content-Length with the body; Transfer-Encoding "
                      "(chunked) is not accepted")
    if len(lengths) > 1:
        raise Refusal("bad_request", "a request must have at most one Content-Length header")
    if not lengths:
        return None
    text = lengths[0].strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise Refusal("invalid_input", f"Content-Length {lengths[0]!r} is not a number of bytes",
                      field="Content-Length")
    return int(text)


def is_json_type(content_type: str | None) -> bool:
    """Is this Content-Type exactly application/json, with at most a UTF-8 charset?"""
    return content_type is not None and _JSON_TYPE.fullmatch(content_type) is not None
