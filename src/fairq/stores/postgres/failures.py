"""What a psycopg failure means: the fairq error for it.

Connection loss, a server shutting down or refusing connections is
Unavailable; a serialization failure or a deadlock is a TransientError
(the call wrote nothing and may be made again: fairq never retries it
itself); a lock wait that ran out is Busy; a read-only transaction is
ReadOnly; a full disk DiskFull; anything else a StoreError. The driver's
error is always the __cause__. An error an application's callback raised
(marked by from_application) is left as it is. Knows nothing about queues.
"""

from __future__ import annotations

from ...errors import Busy, DiskFull, FairqError, ReadOnly, StoreError, TransientError, Unavailable
from .url import scrubbed

#: Marks a driver error raised inside an application's callback.
_APPLICATION_MARK = "_fairq_application_error"

# SQLSTATE classes and codes fairq tells apart.
_TRANSIENT = {"40001": "a serialization failure", "40P01": "a deadlock", "40003": "an unknown commit outcome"}
_UNAVAILABLE = {"57P01": "the server is shutting down", "57P02": "the server crashed",
                "57P03": "the server is not accepting connections yet", "53300": "too many connections",
                "25P03": "the server ended the session, idle inside a transaction for longer than "
                         "idle_in_transaction_session_timeout",
                "57P05": "the server ended the session, idle for longer than idle_session_timeout"}


def from_application(exc: BaseException) -> None:
    """Mark `exc`, raised by an application's callback, to reach the caller as it is."""
    if _is_driver_error(exc):
        try:
            setattr(exc, _APPLICATION_MARK, True)
        except AttributeError:  # pragma: no cover - driver errors take attributes
            pass


def _is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("psycopg")


def typed(exc: BaseException, where: str, *, wrote_nothing: bool = False,
          url: str | None = None) -> BaseException | None:
    """The fairq error for a driver error of fairq's own statements (raise it
    `from exc`); None for anything else, which the caller re-raises as it is.
    wrote_nothing: the error came where nothing can have been written (connecting,
    BEGIN, a read-only snapshot). url: the URL connected to, whose secrets the
    driver's text may quote (they are replaced by ***)."""
    if isinstance(exc, FairqError) or not _is_driver_error(exc) or getattr(exc, _APPLICATION_MARK, False):
        return None
    state = getattr(exc, "sqlstate", None) or ""
    text = str(exc).strip() or type(exc).__name__
    if url is not None:
        text = scrubbed(text, url)
    if state in _TRANSIENT:
        return TransientError(f"{where}: {_TRANSIENT[state]} ({text}); nothing from this call was "
                              "written: make the call again")
    if state in _UNAVAILABLE or state.startswith("08") or (not state and _connection_error(exc)):
        reason = _UNAVAILABLE.get(state, "the connection to the server failed")
        if wrote_nothing:
            return Unavailable(where, f"{where}: {reason} ({text}); nothing was written")
        return Unavailable(where, f"{where}: {reason} ({text}); a write in flight may or may not "
                                  "have committed: read before repeating it")
    if state == "55P03" or state == "57014":
        return Busy(f"{where}: a lock or statement timeout ran out ({text}); nothing was written")
    if state == "25006":
        return ReadOnly(where, f"{where} is read-only here ({text}): open the queue without readonly=True, "
                               "or point it at a primary server")
    if state == "53100":
        return DiskFull(where, f"{where}: the server's disk is full ({text}); nothing from this call "
                               "was written")
    return StoreError(where, f"{where}: a statement failed ({type(exc).__name__}: {text}); what this "
                             "call wrote was rolled back")


def _connection_error(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name in ("OperationalError", "InterfaceError", "ConnectionTimeout")


def reraise(exc: BaseException, where: str, *, wrote_nothing: bool = False, url: str | None = None) -> None:
    """Raise the fairq error for `exc` from it, if there is one; else return."""
    err = typed(exc, where, wrote_nothing=wrote_nothing, url=url)
    if err is not None:
        raise err from exc
