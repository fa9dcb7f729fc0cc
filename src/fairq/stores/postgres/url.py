"""What a PostgreSQL URL asks of fairq, and what is handed to the driver.

fairq's own settings ride in the URL's query as `fairq_*` parameters, so one
string names a queue everywhere (Queue, Inbox, `fairq --db`, FAIRQ_DB). They
are taken out before the URL reaches libpq, which would refuse them; an
unknown one (or one spelt in another case) is refused (InvalidInput naming
it). The driver's settings that fairq picks when the URL does not: a connect
timeout, so a host that never answers cannot hang an open, and TCP
keepalives, so a peer gone without a reset is noticed. The session settings
fairq asks of the server (SESSION_BOUNDS) bound how long a frozen session
keeps its locks. redacted() is the one way a URL is shown. Knows nothing
about queues; opens nothing; imports no driver.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidInput

#: Seconds an attempt to connect may take, unless the URL (connect_timeout=)
#: or the environment (PGCONNECT_TIMEOUT) says otherwise.
CONNECT_TIMEOUT = 10

#: libpq's TCP settings fairq gives a connection whose URL does not: an idle
#: connection is probed after 30 s, every 10 s, given up after 3 unanswered
#: probes; data unacknowledged for 60 s (tcp_user_timeout, in ms) ends it.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3,
              "tcp_user_timeout": 60000}

#: Seconds a session of fairq's may sit idle inside an open transaction
#: before the server ends it (idle_in_transaction_session_timeout), unless the
#: URL's fairq_idle_in_transaction_timeout, its options=-c, or the server's,
#: database's or role's configuration sets it.
IDLE_IN_TRANSACTION_TIMEOUT = 60

#: The server-side session settings fairq asks for where nothing configured
#: them: the bound above, and the server's own TCP keepalives towards this
#: client (the same probes as KEEPALIVES, seen from the server).
SESSION_BOUNDS = {"idle_in_transaction_session_timeout": f"{IDLE_IN_TRANSACTION_TIMEOUT}s",
                  "tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3",
                  "tcp_user_timeout": "60000"}

#: libpq parameters whose value is a secret: shown as *** wherever a URL is shown.
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})

#: libpq parameters that take an integer (libpq refuses anything else when connecting).
INTEGER_PARAMETERS = ("connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                      "keepalives_count", "tcp_user_timeout")

#: Connections a queue's calls may hold at once (fairq_pool=N overrides it):
#: threads sharing one Queue run that many calls at a time. Each is opened
#: only when a call finds every open one in use.
POOL_SIZE = 4
#: The largest fairq_pool accepted.
POOL_MAX = 100

#: fairq_prepare: "on" (psycopg prepares a statement once it has run a few
#: times) or "off" (never: for PgBouncer in transaction mode before 1.21).
_PREPARE = {"on": True, "off": False}
_KNOWN = ("fairq_prepare", "fairq_idle_in_transaction_timeout", "fairq_pool")
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


@dataclass(frozen=True)
class Target:
    """A PostgreSQL URL taken apart: what libpq gets, and fairq's own settings."""

    conninfo: str  # the URL without fairq_* parameters
    prepare: bool  # psycopg may prepare statements (fairq_prepare=on, the default)
    # Session settings to ask for: (values, the names the URL set through a fairq_ parameter).
    session: dict[str, str] = field(default_factory=lambda: dict(SESSION_BOUNDS))
    forced: frozenset[str] = frozenset()
    pool: int = POOL_SIZE  # connections the queue's calls may hold at once (fairq_pool)

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments for psycopg.connect(conninfo, ...) beside the URL's own."""
        args: dict[str, Any] = {}
        if not self.prepare:
            args["prepare_threshold"] = None  # never prepare
        given = {key for key, _ in query_pairs(self.conninfo)}
        if "connect_timeout" not in given and not os.environ.get("PGCONNECT_TIMEOUT"):
            args["connect_timeout"] = CONNECT_TIMEOUT
        args.update({key: value for key, value in KEEPALIVES.items() if key not in given})
        return args


def query_pairs(url: str) -> list[tuple[str, str]]:
    """The URL's query parameters, decoded, in order."""
    query = urllib.parse.urlsplit(url).query
    return [(urllib.parse.unquote(k), urllib.parse.unquote(v))
            for k, _, v in (piece.partition("=") for piece in query.split("&") if piece)]


def parse(url: str) -> Target:
    """The URL's fairq_* settings (refusing unknown ones) and the rest for libpq,
    unchanged; InvalidInput naming the first bad parameter, before anything connects."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # its text quotes nothing of the URL
        raise InvalidInput("url", f"is not a valid PostgreSQL URL ({exc})") from None
    kept, ours = [], {}
    for piece in parts.query.split("&") if parts.query else []:
        key, _, value = piece.partition("=")
        key = urllib.parse.unquote(key)
        if key.startswith("fairq_"):
            ours[key] = urllib.parse.unquote(value)
        elif key.lower().startswith("fairq_"):
            near = [k for k in _KNOWN if k == key.lower()]
            hint = f"did you mean {near[0]}?" if near else f"known: {', '.join(_KNOWN)}"
            raise InvalidInput(key, f"is not a fairq URL parameter: fairq's are spelt in lower case ({hint})")
        else:
            kept.append(piece)  # as written: libpq decodes it
    unknown = sorted(set(ours) - set(_KNOWN))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a fairq URL parameter (unknown: {', '.join(unknown)}; "
                                       f"known: {', '.join(_KNOWN)})")
    prepare = ours.get("fairq_prepare", "on")
    if prepare not in _PREPARE:
        raise InvalidInput("fairq_prepare", f"must be on or off, got {prepare!r}")
    session, forced = dict(SESSION_BOUNDS), frozenset[str]()
    if "fairq_idle_in_transaction_timeout" in ours:
        bound = _idle_bound(ours["fairq_idle_in_transaction_timeout"])
        if bound is None:
            del session["idle_in_transaction_session_timeout"]  # fairq asks nothing: the server's applies
        else:
            session["idle_in_transaction_session_timeout"] = bound
            forced = frozenset({"idle_in_transaction_session_timeout"})
    conninfo = urllib.parse.urlunsplit(parts._replace(query="&".join(kept))) if ours else url
    for key, value in query_pairs(conninfo):
        if key in INTEGER_PARAMETERS and not _INTEGER.fullmatch(value):
            raise InvalidInput(key, f"must be an integer, got {value!r}")
    return Target(conninfo, _PREPARE[prepare], session, forced, _pool_size(ours.get("fairq_pool")))


def _pool_size(value: str | None) -> int:
    """fairq_pool: a whole number of connections from 1 to POOL_MAX (POOL_SIZE when not given)."""
    if value is None:
        return POOL_SIZE
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= POOL_MAX:
        raise InvalidInput("fairq_pool", f"must be a whole number of connections from 1 to {POOL_MAX}, "
                                         f"got {value!r}")
    return int(value)


def _idle_bound(value: str) -> str | None:
    """fairq_idle_in_transaction_timeout: seconds > 0 (the server setting's value), or "off"."""
    if value == "off":
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0.001 <= seconds <= 2_147_483:  # the server counts it in int milliseconds
        raise InvalidInput("fairq_idle_in_transaction_timeout",
                           f"must be a number of seconds from 0.001 to 2147483, or off; got {value!r}")
    return f"{round(seconds * 1000)}ms"


def redacted(url: str) -> str:
    """The URL as it may be shown: a password in it (user:password@, ?password=,
    ?sslpassword=) replaced by ***; anything else as written."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url.partition(":")[0] + "://(a URL that cannot be read)"
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    pieces = []
    for piece in parts.query.split("&") if parts.query else []:
        key, eq, _ = piece.partition("=")
        secret = urllib.parse.unquote(key).strip().lower() in SECRET_PARAMETERS
        pieces.append(f"{key}{eq}***" if secret else piece)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="&".join(pieces)))


def secrets(url: str) -> list[str]:
    """The secret values in a URL (its password and secret parameters, as
    written and decoded, longest first), to be kept out of any text that
    might echo them (a driver's message may quote the URL or a token of it)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    userinfo = parts.netloc.rpartition("@")[0]
    raw = [userinfo.partition(":")[2]] if ":" in userinfo else []
    for piece in parts.query.split("&") if parts.query else []:
        key, _, value = piece.partition("=")
        if urllib.parse.unquote(key).strip().lower() in SECRET_PARAMETERS:
            raw.append(value)
    found = {form for value in raw if value for form in (value, urllib.parse.unquote(value))}
    return sorted(found, key=len, reverse=True)


def scrubbed(text: str, url: str) -> str:
    """`text` with the URL shown redacted and every secret of it replaced by ***."""
    text = text.replace(url, redacted(url))
    for secret in secrets(url):
        text = text.replace(secret, "***")
    return text
