"""Read a JSONL file of events strictly, before anything is stored.

One JSON object per line with ``event_id`` and ``body``, optionally ``flow``
and ``delay`` (seconds). UTF-8 with an optional BOM; LF or CRLF; blank lines
are ignored. The whole file is read and checked first: a file or line over
its limit, bytes that are not UTF-8, text that is not JSON, a duplicate key,
NaN or Infinity, an unknown or missing key, a bad value, or an id repeated
with a different body or flow is refused with an InvalidInput or Conflict
naming the line, the field and the reason. An id repeated with identical
content is kept (it collapses to one event when stored).

This module reads and checks; storing the result is Queue.ingest's one
transaction. It holds no SQL and reads no clock.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Union

from . import _validate as v
from ._json import StrictJSONError, json_type, loads_strict
from .errors import Conflict, InvalidInput
from .store.queue import NewEvent

Source = Union[str, "os.PathLike[str]", bytes, BinaryIO]

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_LINES = 10_000
#: Room on a line for event_id, flow, delay, the keys and spacing, beyond the body.
ENVELOPE_BYTES = 4096

_BOM = b"\xef\xbb\xbf"
_BLANK = b" \t\r"  # JSON whitespace that may pad an empty line


@dataclass(frozen=True)
class Limits:
    """How much one file may hold, and the form of its ids. A tight envelope for
    a file of order ids is ``Limits.make(max_bytes=1_000_000, max_lines=1000, max_body_bytes=10_000,
    id_pattern=r"E[0-9]{4}")``."""

    max_bytes: int  # the whole file, BOM and line ends included
    max_lines: int  # non-blank lines
    max_line_bytes: int  # one line without its line end
    max_body_bytes: int  # one body as canonical JSON
    id_pattern: re.Pattern[str] | None  # every event_id must match it whole

    @classmethod
    def make(
        cls, *, max_bytes: int = DEFAULT_MAX_BYTES, max_lines: int = DEFAULT_MAX_LINES,
        max_line_bytes: int | None = None, max_body_bytes: int = v.DEFAULT_MAX_BODY_BYTES,
        id_pattern: str | re.Pattern[str] | None = None, body_ceiling: int = 1 << 30,
    ) -> Limits:
        """Validated limits; max_line_bytes defaults to the body limit plus ENVELOPE_BYTES."""
        max_body_bytes = v.count(max_body_bytes, "max_body_bytes", low=2, high=body_ceiling)
        if max_line_bytes is None:
            max_line_bytes = max_body_bytes + ENVELOPE_BYTES
        return cls(
            max_bytes=v.count(max_bytes, "max_bytes", low=1, high=1 << 31),
            max_lines=v.count(max_lines, "max_lines", low=1, high=10_000_000),
            max_line_bytes=v.count(max_line_bytes, "max_line_bytes", low=2, high=1 << 31),
            max_body_bytes=max_body_bytes,
            id_pattern=_pattern(id_pattern),
        )


@dataclass(frozen=True)
class Line:
    """A line's object, checked for shape only: values are still the caller's to validate."""

    number: int
    fields: dict[str, Any]


def read(source: Source, limits: Limits,
         make_event: Callable[[dict[str, Any]], NewEvent]) -> list[tuple[int, NewEvent]]:
    """Every event in the file as (line number, validated event), in file order.

    `make_event` turns a line's object into a NewEvent as any enqueue does,
    raising InvalidInput naming the field; the error is re-raised with the
    line number.
    """
    events = []
    for line in _lines(_read_bytes(source, limits.max_bytes), limits):
        try:
            event = make_event(line.fields)
            _check_limits(event, limits)
        except InvalidInput as exc:
            raise InvalidInput(exc.field, exc.problem, line=line.number) from None
        events.append((line.number, event))
    _check_repeats(events)
    return events


def _check_limits(event: NewEvent, limits: Limits) -> None:
    """What this file allows beyond what any enqueue does: a smaller body, an id pattern."""
    size = len(event.body.encode("utf-8"))
    if size > limits.max_body_bytes:
        raise InvalidInput("body", f"is {size} bytes of canonical JSON, over the limit of {limits.max_body_bytes}")
    if limits.id_pattern is not None and not limits.id_pattern.fullmatch(event.event_id):
        raise InvalidInput("event_id", f"{event.event_id!r} does not match {limits.id_pattern.pattern!r}")


def _read_bytes(source: Source, max_bytes: int) -> bytes:
    """The file's bytes (a path, bytes, or a file opened in binary mode), refused past max_bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as f:
                data = _read_at_most(f, max_bytes + 1)
        except OSError as exc:
            raise InvalidInput("source", f"cannot read {os.fspath(source)}: {exc.strerror or exc}") from None
    elif callable(getattr(source, "read", None)):
        data = _read_at_most(source, max_bytes + 1)
    else:
        raise InvalidInput("source", f"must be a path, bytes or a binary file, not {type(source).__name__}")
    if len(data) > max_bytes:
        line = data.count(b"\n", 0, max_bytes) + 1
        raise InvalidInput("file", f"is over the limit of {max_bytes} bytes", line=line)
    return data


def _read_at_most(f: Any, n: int) -> bytes:
    chunks, size = [], 0
    while size < n:
        chunk = f.read(n - size)
        if not chunk:
            break
        if not isinstance(chunk, (bytes, bytearray)):
            raise InvalidInput("source", "must be opened in binary mode ('rb'), it gave "
                               f"{type(chunk).__name__}")
        chunks.append(bytes(chunk))
        size += len(chunk)
    return b"".join(chunks)


def _lines(data: bytes, limits: Limits) -> list[Line]:
    """Each non-blank line as a JSON object with no duplicate keys."""
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    out = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw.strip(_BLANK):
            continue
        if len(out) == limits.max_lines:
            raise InvalidInput("file", f"has more than {limits.max_lines} non-blank lines", line=number)
        if len(raw) > limits.max_line_bytes:
            raise InvalidInput("line", f"is {len(raw)} bytes, over the limit of {limits.max_line_bytes}",
                               line=number)
        out.append(Line(number, _parse(raw, number)))
    return out


def _parse(raw: bytes, number: int) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("encoding", f"byte {exc.start + 1} is not UTF-8 ({exc.reason})", line=number) from None
    if text.startswith("\ufeff"):
        raise InvalidInput("encoding", "a byte order mark is allowed only at the start of the file", line=number)
    try:
        value = loads_strict(text)
    except StrictJSONError as exc:
        raise InvalidInput(exc.path or "json", exc.problem, line=number) from None
    if not isinstance(value, dict):
        raise InvalidInput("json", f"must be an object with event_id and body, not {_article(value)}",
                           line=number)
    return value


def _check_repeats(events: list[tuple[int, NewEvent]]) -> None:
    """An id repeated in the file must repeat its flow and body exactly (delay aside)."""
    first: dict[str, tuple[int, NewEvent]] = {}
    for number, event in events:
        if event.event_id not in first:
            first[event.event_id] = (number, event)
            continue
        earlier_line, earlier = first[event.event_id]
        for field in ("flow", "body"):
            if getattr(event, field) != getattr(earlier, field):
                raise Conflict(event.event_id, field,
                               f"event {event.event_id!r} repeats line {earlier_line} with a different {field}",
                               line=number)


def line_of(events: list[tuple[int, NewEvent]], event_id: str) -> int:
    """The first line that carries `event_id`."""
    return next(number for number, event in events if event.event_id == event_id)


def _pattern(value: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    if value is None or isinstance(value, re.Pattern):
        return value
    if not isinstance(value, str):
        raise InvalidInput("id_pattern", f"must be a str or re.Pattern, not {type(value).__name__}")
    try:
        return re.compile(value)
    except re.error as exc:
        raise InvalidInput("id_pattern", f"is not a regular expression: {exc}") from None


def _article(value: Any) -> str:
    name = json_type(value)
    return f"an {name}" if name[0] in "ao" else f"a {name}"
