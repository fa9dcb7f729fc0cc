"""What a PostgreSQL URL asks of fairq, and what is handed to the driver.

fairq's own settings ride in the URL's query as `fairq_*` parameters, so one
string names a queue everywhere (Queue, Inbox, `fairq --db`, FAIRQ_DB). They
are taken out before the URL reaches libpq, which would refuse them; an
unknown one is refused (InvalidInput naming it). The driver's settings that
fairq picks when the URL does not: a connect timeout, so a host that never
answers cannot hang an open. Knows nothing about queues; opens nothing.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput

#: Seconds an attempt to connect may take, unless the URL (connect_timeout=)
#: or the environment (PGCONNECT_TIMEOUT) says otherwise.
CONNECT_TIMEOUT = 10

#: fairq_prepare: "on" (psycopg prepares a statement once it has run a few
#: times) or "off" (never: for PgBouncer in transaction mode before 1.21).
_PREPARE = {"on": True, "off": False}


@dataclass(frozen=True)
class Target:
    """A PostgreSQL URL taken apart: what libpq gets, and fairq's own settings."""

    conninfo: str  # the URL without fairq_* parameters
    prepare: bool  # psycopg may prepare statements (fairq_prepare=on, the default)

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments for psycopg.connect(conninfo, ...) beside the URL's own."""
        args: dict[str, Any] = {}
        if not self.prepare:
            args["prepare_threshold"] = None  # never prepare
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.conninfo).query)
        if "connect_timeout" not in query and not os.environ.get("PGCONNECT_TIMEOUT"):
            args["connect_timeout"] = CONNECT_TIMEOUT
        return args


def parse(url: str) -> Target:
    """The URL's fairq_* settings (refusing unknown ones) and the rest for libpq, unchanged."""
    parts = urllib.parse.urlsplit(url)
    kept, ours = [], {}
    for piece in parts.query.split("&") if parts.query else []:
        key, _, value = piece.partition("=")
        key = urllib.parse.unquote(key)
        if key.startswith("fairq_"):
            ours[key] = urllib.parse.unquote(value)
        else:
            kept.append(piece)  # as written: libpq decodes it
    unknown = sorted(set(ours) - {"fairq_prepare"})
    if unknown:
        raise InvalidInput(unknown[0], f"is not a fairq URL parameter (unknown: {', '.join(unknown)}; "
                                       "known: fairq_prepare)")
    prepare = ours.get("fairq_prepare", "on")
    if prepare not in _PREPARE:
        raise InvalidInput("fairq_prepare", f"must be on or off, got {prepare!r}")
    conninfo = urllib.parse.urlunsplit(parts._replace(query="&".join(kept))) if ours else url
    return Target(conninfo, _PREPARE[prepare])
