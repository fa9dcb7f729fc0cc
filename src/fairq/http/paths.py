"""A request's URL parts as fairq.Client sends them: a name as one path
segment, query parameters, each checked as the Queue checks it (a query
string carries only text). No I/O here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from .. import _validate as v
from ..errors import InvalidInput

__all__ = ["segment", "query"]


def segment(name: Any, field: str) -> str:
    """A name as one percent-encoded path segment, checked as the Queue checks it."""
    return quote(v.identifier(name, field), safe="")


def query(*, text: Mapping[str, Any] = {}, ints: Mapping[str, Any] = {}) -> dict[str, str]:
    """Query parameters, type-checked here because a query string carries only text."""
    out = {}
    for name, value in text.items():
        if value is not None:
            if not isinstance(value, str):
                raise InvalidInput(name, f"must be a str, not {type(value).__name__}")
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidInput(name, "is not valid Unicode (lone surrogate)") from None
            out[name] = str(value)
    for name, value in ints.items():
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(name, f"must be an int, not {type(value).__name__}")
            out[name] = str(value)
    return out
