"""Read a JSONL file of events strictly, and store it in one transaction, streaming.

One JSON object per line with ``event_id`` and ``body``, optionally ``flow``,
``tenant``, ``delay`` (seconds), ``kind``, ``max_attempts``, ``timeout`` (seconds)
and ``backoff`` (an object of base, factor, cap, jitter). UTF-8 with an optional BOM; LF or CRLF; blank lines
are ignored. A file or line over its limit, bytes that are not UTF-8, text
that is not JSON, a duplicate key, NaN or Infinity, an unknown or missing
key, a bad value, or an id repeated with a different body, flow, tenant or kind (in the
file or against a stored event) is refused with an InvalidInput or Conflict
naming the line, the field and the reason, and nothing is stored. An id
repeated with identical content collapses to one event.

Two passes, so memory does not grow with the file: `check` reads the
source a line at a time before any lock is taken and writes each validated,
canonical event to a temporary file; `store`, inside the caller's
transaction, reads them back and enqueues CHUNK_LINES at a time, without
parsing or validating the source again (the lock is held for the inserts
and little else). This module holds no SQL and reads no clock.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple, Union

from . import _validate as v
from ._json import StrictJSONError, json_type, loads_strict
from .stores.backend import NewEvent, WriteTxn
from .errors import Conflict, DiskFull, InvalidInput
from .limits import DEFAULT_MAX_BODY_BYTES, INGEST_MAX_BYTES, INGEST_MAX_LINES, MAX_BODY_CEILING
from .types import Enqueued

Source = Union[str, "os.PathLike[str]", bytes, BinaryIO]

#: Room on a line for event_id, flow, delay, the keys and spacing, beyond the body.
ENVELOPE_BYTES = 4096

_BOM = b"\xef\xbb\xbf"
_BLANK = b" \t\r"  # JSON whitespace that may pad an empty line

#: Lines enqueued per statement batch inside the one transaction: the most
#: parsed lines held in memory at once.
CHUNK_LINES = 1000

MakeEvent = Callable[[dict[str, Any]], NewEvent]


class Ingested(NamedTuple):
    """What Queue.ingest(..., summary=True) stored: non-blank lines, and how
    many of them created an event (the others repeat a stored or earlier one)."""

    lines: int
    created: int

    @property
    def duplicates(self) -> int:
        return self.lines - self.created


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
        cls, *, max_bytes: int = INGEST_MAX_BYTES, max_lines: int = INGEST_MAX_LINES,
        max_line_bytes: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        id_pattern: str | re.Pattern[str] | None = None, body_ceiling: int = MAX_BODY_CEILING,
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


class Checked:
    """A file that passed `check`: its events, validated and canonical, one
    per line in a temporary file, to be read back inside the transaction
    without parsing the source again."""

    def __init__(self) -> None:
        try:
            self._spool = tempfile.TemporaryFile("w+", encoding="utf-8")
        except OSError as exc:  # no temporary folder that can be written: nothing was stored
            raise _no_room(exc) from exc
        self.lines = 0  # non-blank lines

    def add(self, number: int, event: NewEvent) -> None:
        try:
            self._spool.write(json.dumps([number, event.event_id, event.flow, event.body, event.delay_ms,
                                           event.tenant, event.kind, event.max_attempts, event.timeout_ms,
                                           event.backoff]) + "\n")
        except OSError as exc:
            raise _no_room(exc) from exc
        self.lines += 1

    def events(self) -> Iterator[tuple[int, NewEvent]]:
        """(line number, event) of each non-blank line, in file order."""
        try:
            self._spool.flush()
        except OSError as exc:
            raise _no_room(exc) from exc
        self._spool.seek(0)
        for text in self._spool:
            number, event_id, flow, body, delay_ms, tenant, kind, max_attempts, timeout_ms, backoff = json.loads(text)
            yield number, NewEvent(event_id, flow, body, delay_ms, tenant=tenant, kind=kind,
                                   max_attempts=max_attempts, timeout_ms=timeout_ms, backoff=backoff)

    def close(self) -> None:
        self._spool.close()


def _no_room(exc: OSError) -> DiskFull:
    where = tempfile.gettempdir()
    return DiskFull(where, f"cannot write the checked copy of the file in {where} ({exc}); nothing was "
                           "stored: free space there, or point TMPDIR at a folder with room")


def check(source: Source, limits: Limits, make_event: MakeEvent) -> Checked:
    """Pass one, before any lock: read the source a line at a time and refuse
    the file at its first bad line.

    Every check but repeats is made here (those need the stored events and
    are made by `store`).
    """
    checked = Checked()
    try:
        with _binary(source) as f:
            for number, fields in _objects(f, limits):
                try:
                    event = make_event(fields)
                    _check_limits(event, limits)
                except InvalidInput as exc:
                    raise InvalidInput(exc.field, exc.problem, line=number) from None
                checked.add(number, event)
    except BaseException:
        checked.close()
        raise
    return checked


@contextlib.contextmanager
def _binary(source: Source) -> Iterator[Any]:
    """The source as a binary file to read lines from: a path, bytes, or a file object."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        yield io.BytesIO(bytes(source))
    elif isinstance(source, (str, os.PathLike)):
        try:
            f = open(source, "rb")
        except OSError as exc:
            raise InvalidInput("source", f"cannot read {os.fspath(source)}: {exc.strerror or exc}") from None
        with f:
            yield f
    elif callable(getattr(source, "readline", None)):
        yield source
    else:
        raise InvalidInput("source", f"must be a path, bytes or a binary file, not {type(source).__name__}")


def store(tx: WriteTxn, checked: Checked, now_ms: int, results: list[Enqueued] | None) -> Ingested:
    """Pass two, inside the caller's transaction: enqueue every checked
    line, CHUNK_LINES at a time; a repeat with other content raises Conflict
    naming its line (the caller's transaction then rolls back all of it).
    Appends one Enqueued per line to `results` if given."""
    lines = created = 0
    chunk: list[tuple[int, NewEvent]] = []
    for item in checked.events():
        chunk.append(item)
        if len(chunk) == CHUNK_LINES:
            created += _store_chunk(tx, checked, chunk, now_ms, results)
            lines += len(chunk)
            chunk = []
    if chunk:
        created += _store_chunk(tx, checked, chunk, now_ms, results)
        lines += len(chunk)
    return Ingested(lines, created)


def _store_chunk(tx: WriteTxn, checked: Checked, chunk: list[tuple[int, NewEvent]], now_ms: int,
                 results: list[Enqueued] | None) -> int:
    first: dict[str, tuple[int, NewEvent]] = {}
    for number, event in chunk:  # repeats inside the chunk name the line they repeat
        seen = first.setdefault(event.event_id, (number, event))
        if seen[0] != number:
            _refuse_repeat(event, number, *seen)
    try:
        done = tx.enqueue_many([event for _, event in chunk], now_ms)
    except Conflict as exc:
        number = first[exc.event_id][0]
        for earlier_number, earlier in checked.events():
            if earlier_number >= number:
                break
            if earlier.event_id == exc.event_id:  # an earlier chunk of this file stored it
                _refuse_repeat(first[exc.event_id][1], number, earlier_number, earlier)
        raise Conflict(exc.event_id, exc.field, str(exc), line=number) from exc
    if results is not None:
        results.extend(done)
    return sum(e.created for e in done)


def _refuse_repeat(event: NewEvent, number: int, earlier_number: int, earlier: NewEvent) -> None:
    """An id repeated in the file must repeat its flow, tenant, kind and body exactly (delay
    and its own policy aside: the first line's is stored)."""
    for field in ("flow", "tenant", "kind", "body"):
        if getattr(event, field) != getattr(earlier, field):
            raise Conflict(event.event_id, field,
                           f"event {event.event_id!r} repeats line {earlier_number} with a different {field}",
                           line=number)


def _check_limits(event: NewEvent, limits: Limits) -> None:
    """What this file allows beyond what any enqueue does: a smaller body, an id pattern."""
    size = len(event.body.encode("utf-8"))
    if size > limits.max_body_bytes:
        raise InvalidInput("body", f"is {size} bytes of canonical JSON, over the limit of {limits.max_body_bytes}")
    if limits.id_pattern is not None and not limits.id_pattern.fullmatch(event.event_id):
        raise InvalidInput("event_id", f"{event.event_id!r} does not match {limits.id_pattern.pattern!r}")


def _objects(f: Any, limits: Limits) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line as a JSON object with no duplicate keys; a line at a time."""
    total = count = 0
    cap = limits.max_line_bytes + 2  # the longest line allowed, with CR LF
    number = 0
    while True:
        this_cap = cap + (len(_BOM) if number == 0 else 0)  # a first line may start with a BOM
        raw = f.readline(this_cap)
        if not raw:
            return
        if not isinstance(raw, (bytes, bytearray)):
            raise InvalidInput("source", f"must be opened in binary mode ('rb'), it gave {type(raw).__name__}")
        number += 1
        size, tail = len(raw), bytes(raw[-2:])
        if size == this_cap and not raw.endswith(b"\n"):  # longer than any allowed line: measure the rest
            size, tail = _rest_of_line(f, size, tail, limits.max_bytes - total + 1)
        total += size
        if total > limits.max_bytes:
            raise InvalidInput("file", f"is over the limit of {limits.max_bytes} bytes", line=number)
        if number == 1 and raw.startswith(_BOM):
            raw, size = raw[len(_BOM):], size - len(_BOM)
        length = size - (tail == b"\r\n") - tail.endswith(b"\n")
        raw = raw.rstrip(b"\n")
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if length == len(raw) and not raw.strip(_BLANK):
            continue
        if count == limits.max_lines:
            raise InvalidInput("file", f"has more than {limits.max_lines} non-blank lines", line=number)
        if length > limits.max_line_bytes:
            raise InvalidInput("line", f"is {length} bytes, over the limit of {limits.max_line_bytes}",
                               line=number)
        count += 1
        yield number, _parse(bytes(raw), number)


def _rest_of_line(f: Any, size: int, tail: bytes, budget: int) -> tuple[int, bytes]:
    """Read past the rest of an over-long line (at most `budget` more bytes);
    its whole size and last two bytes."""
    while size <= budget and not tail.endswith(b"\n"):
        more = f.readline(1 << 16)
        if not more:
            break
        size += len(more)
        tail = (tail + more)[-2:]
    return size, tail


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
