"""JSON in one place: strict parsing of untrusted text, canonical text for
storage, and the plain-JSON form of fairq's values.

Python's json.loads accepts more than JSON: NaN, Infinity and duplicate keys
(the last one silently wins). Every reader of outside text (a JSONL file, an
HTTP body, a command-line argument) goes through loads_strict, which refuses
them and says where. No SQL, no clock.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from enum import Enum
from typing import Any

from .types import UndecodableBody

__all__ = ["StrictJSONError", "loads_strict", "canonical", "to_json", "json_type"]

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical(value: Any) -> str:
    """Sorted keys, compact, UTF-8 text, no NaN: one text for one JSON value."""
    return _CANONICAL.encode(value)


def _tree_encoder() -> Callable[[Any, int], Any] | None:
    """The C encoder of canonical() made once, without the check for cycles
    (None where json has no C encoder): JSONEncoder.encode makes a new one
    per call, the larger part of the cost of a small body."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        made: Callable[[Any, int], Any] = make(
            None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, False)
    except TypeError:  # another signature: canonical() serves
        return None
    return made


_TREE = _tree_encoder()


def canonical_tree(value: Any) -> str:
    """canonical(value) for a value known to be a tree of JSON types (a body
    _validate.body has checked: no cycle, no NaN): the same text, faster."""
    if _TREE is None:
        return canonical(value)
    return "".join(_TREE(value, 0))


class StrictJSONError(ValueError):
    """Text that is not strict JSON; `path` says where ("" for the whole text)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


def loads_strict(text: str) -> Any:
    """The JSON value of `text`, refusing duplicate keys and NaN/Infinity anywhere.

    Raises StrictJSONError: for malformed text (path ""), or naming the path of
    the first duplicated key or non-finite constant, e.g. "body.items[2].sku".
    """
    marked: list[bool] = []  # whether the text holds anything to refuse (most holds nothing)

    def obj(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(pairs)
        if len(value) == len(pairs):
            return value
        marked.append(True)
        return _duplicated(value, pairs)

    def constant(spelling: str) -> _Constant:
        marked.append(True)
        return _Constant(spelling)

    try:
        value = json.loads(text, object_pairs_hook=obj, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise StrictJSONError("", f"is not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise StrictJSONError("", "is nested too deeply") from None
    except ValueError as exc:  # an integer with more digits than Python converts
        raise StrictJSONError("", "is not JSON: " + str(exc).split(";")[0]) from None
    if marked:
        _refuse_marks(value)
    return value


class _Duplicated(dict):  # type: ignore[type-arg]
    """A JSON object in which `key` appeared more than once (refused after parsing)."""

    key: str


def _duplicated(obj: dict[str, Any], pairs: list[tuple[str, Any]]) -> _Duplicated:
    """`obj` marked with the first key `pairs` repeat."""
    marked = _Duplicated(obj)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    return marked


class _Constant(float):
    """NaN, Infinity or -Infinity as the text spells it (refused after parsing, by that name)."""

    spelling: str

    def __new__(cls, spelling: str) -> _Constant:
        value = super().__new__(cls, spelling)
        value.spelling = spelling
        return value


def _refuse_marks(root: Any) -> None:
    """Raise for the first duplicated key or constant, in document order."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Duplicated):
            raise StrictJSONError(f"{path}.{value.key}" if path else value.key, "is a duplicate key")
        if isinstance(value, _Constant):
            raise StrictJSONError(path, f"{value.spelling} is not JSON")
        if isinstance(value, dict):
            stack.extend((item, f"{path}.{key}" if path else key) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))


#: A dataclass field's own JSON entries, or None for the usual {name: value}.
FieldForm = Callable[[str, Any], "dict[str, Any] | None"]


def to_json(value: Any, field_form: FieldForm | None = None) -> Any:
    """A fairq value (frozen dataclass, enum, tuple, float) as plain JSON values;
    an infinite float (the last claim-lag bucket bound) becomes "+Inf".
    field_form(name, item), if given, may give a dataclass field's JSON entries
    itself (a dict of them) instead of {name: to_json(item)}."""
    kind = type(value)
    if kind in _AS_IS:  # most leaves: answered without a look at the type's ancestry
        return value
    names = _FIELDS.get(kind)
    if names is None and kind not in _FIELDS:
        names = _FIELDS[kind] = (
            tuple(f.name for f in dataclasses.fields(value)) if dataclasses.is_dataclass(kind) else None
        )
    if names is not None:
        out: dict[str, Any] = {}
        for name in names:
            item = getattr(value, name)
            own = field_form(name, item) if field_form is not None else None
            out.update(own if own is not None else {name: to_json(item, field_form)})
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and math.isinf(value):
        return "+Inf"
    if isinstance(value, (tuple, list)):
        return [to_json(item, field_form) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item, field_form) for key, item in value.items()}
    return value


# Types whose values are their own JSON form (exact types: a str Enum is not one).
_AS_IS = frozenset({str, int, bool, type(None)})
# Each type met so far: its dataclass field names in order, or None if it is not a dataclass.
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


# json's scanner: (value, end) of the value starting at an index of a text.
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(json.JSONDecoder(), "scan_once")


def body_value(text: str) -> Any:
    """A stored body's value, or an UndecodableBody saying why this process
    cannot decode it (never a raw ValueError: a file written by an older
    fairq, or by a process without Python's int-digit limit, may hold one)."""
    try:
        # The whole text as one value, by json's scanner (json.loads adds a
        # check for surrounding whitespace and a call per layer); anything
        # else, e.g. text with spaces or an error, goes through json.loads.
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError, TypeError, RecursionError):
        pass
    try:
        return json.loads(text)
    except RecursionError:
        return UndecodableBody(text, "it is nested too deeply")
    except ValueError as exc:  # malformed text, or an integer past the int-digit limit
        return UndecodableBody(text, str(exc).split(";")[0])
