"""One request of fairq.Client, and its answer as a value or a fairq error.

A verb's method and path come from the verb table (fairq.api.verbs), the
same declaration the server's routes are registered from, so the client
and the server cannot disagree on where a verb is served. The connection
under each thread is fairq.http.keepalive's; what the answer means is the
caller's (fairq.http.client, fairq.http.remote_schedules).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

from ..api.verbs import route_of
from ..errors import RemoteError, Unavailable
from ..limits import MAX_PAGE
from .keepalive import Connections
from .paths import query, segment
from .wire import check_json, error_from_json, from_json, unencodable

__all__ = ["Transport"]

T = TypeVar("T")


class Transport:
    """Requests to the fairq server at `url`: one kept connection per thread,
    the bearer token on every request, refusals raised as fairq errors."""

    def __init__(self, url: str, *, scheme: str, host: str, port: int, prefix: str, token: str | None,
                 timeout: float) -> None:
        self.url = url
        self.token = token
        self._headers = {"Accept": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._post_headers = {**self._headers, "Content-Type": "application/json"}
        self._prefix = prefix  # a path prefix a proxy in front may route by
        self._connections = Connections(scheme, host, port, timeout)

    @property
    def opened(self) -> int:
        """Connections opened so far: one per thread, and one more each time one was closed."""
        return self._connections.opened

    def close(self) -> None:
        """Close the connections kept open; a later request opens a new one."""
        self._connections.close()

    def post(self, verb: str, captures: Mapping[str, Any] | None = None, /, **payload: Any) -> Any:
        """Send `verb` with `payload` as its JSON body (each value checked to cross as JSON)."""
        for name, value in payload.items():
            check_json(value, name)
        return self.send(verb, captures, payload=payload)

    def send(self, verb: str, captures: Mapping[str, Any] | None = None, *, query: dict[str, str] | None = None,
             payload: dict[str, Any] | None = None, absent: str | None = None) -> Any:
        """`verb`'s request at its route, each capture a checked path segment; see call()."""
        method, pattern = route_of(verb)
        path = pattern.format(**{name: segment(value, name) for name, value in (captures or {}).items()})
        return self.call(method, path, query, payload, absent=absent)

    def pages(self, verb: str, name: str, cls: type[T], limit: int | None, text: dict[str, Any],
              ints: dict[str, Any] | None = None) -> list[T]:
        """Up to `limit` rows (None: all) of the keyed listing `verb` answers
        under `name`, at most MAX_PAGE a request, each page going on after the
        last (the server's `next`, text or, with `ints`, a number)."""
        rows: list[T] = []
        ints = dict(ints or {})
        while True:
            page = MAX_PAGE if limit is None else min(limit - len(rows), MAX_PAGE)
            data = self.send(verb, query=query(text=text, ints={**ints, "limit": page}))
            rows += [from_json(cls, row) for row in data[name]]
            if data.get("next") is None or (limit is not None and len(rows) >= limit):
                return rows
            if "after" in ints:
                ints["after"] = data["next"]
            else:
                text = {**text, "after": data["next"]}

    def call(self, method: str, path: str, query: dict[str, str] | None = None,
             payload: dict[str, Any] | None = None, *, absent: str | None = None) -> Any:
        """The decoded JSON answer (None for 204), or the refusal raised as a fairq error.

        absent: the error code that means "there is no such thing"; it is
        answered as None instead of raised.
        """
        target = self._prefix + path + (f"?{urlencode(query)}" if query else "")
        data, headers = None, self._headers
        if payload is not None:
            text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                raise unencodable(payload) from None
            headers = self._post_headers
        try:
            status, raw = self._connections.exchange(method, target, data, headers)
        except (OSError, http.client.HTTPException) as exc:
            if method in ("GET", "HEAD"):  # a read changes nothing: there is no effect to wonder about
                raise Unavailable(self.url, f"fairq at {self.url} is unreachable ({_reason(exc)}); "
                                  f"is `fairq serve` running there?") from exc
            raise Unavailable(self.url, f"no answer from fairq at {self.url} ({_reason(exc)}); "
                              f"the call may or may not have taken effect") from exc
        if not 200 <= status < 300:
            refusal = _error_body(raw)
            if absent is not None and isinstance(refusal, dict) and refusal.get("error") == absent:
                return None
            if status == 401 and self.token is None:
                raise RemoteError(401, "unauthorized", f"fairq at {self.url} wants a token: set FAIRQ_TOKEN, "
                                  "or pass fairq.Client(url, token=...)") from None
            raise error_from_json(status, refusal, self.url) from None
        if status == 204:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RemoteError(status, "bad_response", f"HTTP {status} with a body that is not JSON") from None


def _error_body(raw: bytes) -> Any:
    """The JSON body of a refusal; None if it has none."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or exc) or type(exc).__name__
