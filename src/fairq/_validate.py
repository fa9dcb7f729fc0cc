"""Turn caller input into canonical values, or raise InvalidInput naming the field.

Every public verb validates all of its input here before it opens a
transaction, so a refusal never leaves anything written. No SQL, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ._json import canonical_tree
from .errors import InvalidInput
from .limits import DEFAULT_MAX_BODY_BYTES, MAX_DEPTH, MAX_ID_CHARS, MAX_KIND_CHARS, MAX_REASON_CHARS
from .types import Outcome

T = TypeVar("T")

#: The most decimal digits an integer in a body may have: Python's default
#: int-digit limit, so every process can read back every stored body, whatever
#: limit the enqueuing process runs with.
MAX_INT_DIGITS = 4300
_INT_BOUND = 10**MAX_INT_DIGITS  # the smallest magnitude with one digit too many

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def identifier(value: Any, field: str) -> str:
    """An event id, flow name, owner or actor: 1..255 chars, no control characters."""
    # The common case in one step: printable ASCII has no control character
    # and always encodes.
    if type(value) is str and 0 < len(value) <= MAX_ID_CHARS and value.isascii() and value.isprintable():
        return value
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidInput(field, "must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInput(field, f"must be at most {MAX_ID_CHARS} characters, got {len(value)}")
    bad = _CONTROL.search(value)
    if bad:
        raise InvalidInput(field, f"must not contain control character {bad.group()!r}")
    _encodable(value, field)
    return value


def optional_identifier(value: Any, field: str) -> str | None:
    return None if value is None else identifier(value, field)


def kind(value: Any, field: str = "kind") -> str:
    """A kind (a task name): 1..200 printable characters, not blank."""
    if type(value) is str and 0 < len(value) <= MAX_KIND_CHARS and value.isprintable() and not value.isspace():
        return value
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}")
    if not value or value.isspace():
        raise InvalidInput(field, "must not be empty or blank")
    if len(value) > MAX_KIND_CHARS:
        raise InvalidInput(field, f"must be at most {MAX_KIND_CHARS} characters, got {len(value)}")
    if not value.isprintable():
        raise InvalidInput(field, "must be printable text (no control or unprintable characters)")
    return str(value)


def reason(value: Any, field: str = "reason", *, required: bool) -> str | None:
    """A free-text explanation: any printable text up to 4096 chars, newlines allowed."""
    if value is None:
        if required:
            raise InvalidInput(field, "is required")
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(field, "must not be empty or blank")
    if len(value) > MAX_REASON_CHARS:
        raise InvalidInput(field, f"must be at most {MAX_REASON_CHARS} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL")
    _encodable(value, field)
    return value


#: The largest number of seconds fairq takes anywhere (a time or a duration):
#: about the year 5138 as a Unix time. Milliseconds of it fit SQLite's integers.
MAX_SECONDS = 1e11


def seconds(value: Any, field: str, *, positive: bool = False) -> float:
    """A finite number of seconds in [0, MAX_SECONDS]; with positive=True at
    least 1 ms (times are stored in whole milliseconds, so less would be 0)."""
    # The common case in one step (a NaN fails both comparisons).
    if type(value) is float and (0.001 if positive else 0.0) <= value <= MAX_SECONDS:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(field, f"must be a number of seconds, not {type(value).__name__}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large to be a float
        finite = False
    if not finite or value > MAX_SECONDS:
        raise InvalidInput(field, f"must be a finite number of seconds up to {MAX_SECONDS:g}, got {value!r}")
    if positive and value < 0.001:
        raise InvalidInput(field, f"must be at least 0.001 (1 ms), got {value!r}")
    if value < 0:
        raise InvalidInput(field, f"must be >= 0, got {value!r}")
    return float(value)


def optional_seconds(value: Any, field: str, *, positive: bool = False) -> float | None:
    return None if value is None else seconds(value, field, positive=positive)


def count(value: Any, field: str, *, low: int, high: int) -> int:
    """An int in [low, high] (bool refused)."""
    if type(value) is int and low <= value <= high:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidInput(field, f"must be between {low} and {high}, got {value}")
    return value


_OUTCOMES = {o.value: o for o in Outcome}


def each(items: Iterable[Any], parse: Callable[[Any], T], *, limit: int | None = None) -> list[T]:
    """parse(item) for every item of a batch (at most `limit` of them, if
    given: the HTTP edge's cap); a refusal names its item ("items[3].body")."""
    if isinstance(items, (str, bytes, Mapping)):
        raise InvalidInput("items", "must be an iterable of items, not a single value")
    try:
        walk = iter(items)
    except TypeError:
        raise InvalidInput("items", f"must be an iterable of items, not {type(items).__name__}") from None
    out = []
    for i, item in enumerate(walk):
        if i == limit:
            raise InvalidInput("items", f"at most {limit} per call")
        try:
            out.append(parse(item))
        except InvalidInput as exc:
            raise exc.within(f"items[{i}]") from None
    return out


def outcome(value: Any, field: str = "outcome") -> Outcome:
    """"ack", "retry", "fail", "release" or the Outcome itself (a str-Enum hashes like its value)."""
    try:
        return _OUTCOMES[value]
    except (KeyError, TypeError):
        raise InvalidInput(field, f"must be one of 'ack', 'retry', 'fail', 'release', got {value!r}") from None


def body(value: Any, field: str = "body", *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> str:
    """The canonical JSON text of a body: sorted keys, compact, UTF-8.

    Refuses anything that would not come back from JSON as it went in: NaN and
    infinities, integers of more than MAX_INT_DIGITS digits, non-str keys,
    tuples, sets, bytes and other non-JSON types. int and float stay distinct
    (1 and 1.0 are different bodies).
    """
    json_value(value, field)
    text = canonical_tree(value)  # both checks refuse a cycle (as too deep) and NaN
    size = len(text) if text.isascii() else len(_encodable(text, field))
    if size > max_bytes:
        raise InvalidInput(field, f"is {size} bytes of canonical JSON, over the limit of {max_bytes}")
    return text


def json_value(value: Any, field: str) -> None:
    """Refuse, naming the exact place (`field`, `field.key`, `field[2]`), a value
    that would not come back from JSON as it went in (see body())."""
    if not _plain_json(value, 0):
        _check_json(value, field)  # raises naming the exact place, or accepts (e.g. a str subclass)


def _plain_json(value: Any, depth: int) -> bool:
    """The fast check: only exact JSON types, finite floats, str keys, bounded depth.

    False sends the value through _check_json, which builds paths for its
    error message; that is too slow to run on every body of a batch.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_INT_BOUND < value < _INT_BOUND)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _plain_json(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:
            if not _plain_json(item, depth + 1):
                return False
        return True
    return False


def _check_json(root: Any, field: str) -> None:
    stack: list[tuple[Any, str, int]] = [(root, field, 0)]
    while stack:
        value, path, depth = stack.pop()
        if value is None or isinstance(value, (str, bool)):
            continue
        if isinstance(value, int):
            if not -_INT_BOUND < value < _INT_BOUND:
                raise InvalidInput(path, f"is an integer of more than {MAX_INT_DIGITS} digits")
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidInput(path, f"{value!r} is not JSON")
            continue
        if depth >= MAX_DEPTH:
            raise InvalidInput(path, f"is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidInput(path, f"has a {type(key).__name__} key {key!r}; JSON keys are str")
                stack.append((item, f"{path}.{key}", depth + 1))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                stack.append((item, f"{path}[{i}]", depth + 1))
        else:
            raise InvalidInput(path, f"{type(value).__name__} is not a JSON type")


def _encodable(text: str, field: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, "is not valid Unicode (lone surrogate)") from None
