"""What an SQLite failure means: its result code, and the fairq error for it.

A lock timeout is Busy; a full disk, a file that cannot be written, a
damaged file are StoreErrors (DiskFull, ReadOnly, Corrupt), and every other
sqlite3 error of fairq's own statements a plain StoreError, each with the
driver's error as __cause__. An sqlite3 error an application's callback
raised (marked by from_application) is left as it is: it is the
application's own. Knows nothing about queues or transactions.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from ...errors import Busy, Corrupt, DiskFull, ReadOnly, StoreError

# Primary SQLite result codes fairq tells apart.
_SQLITE_BUSY = 5  # another connection holds the lock
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_NOTADB = 26


def _primary_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of an sqlite3 error. Python 3.10 does not
    carry it, so there it is told from the message SQLite gives."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    text = str(exc)
    for needle, found in (("database is locked", _SQLITE_BUSY), ("database table is locked", _SQLITE_BUSY),
                          ("not a database", _SQLITE_NOTADB), ("disk image is malformed", _SQLITE_CORRUPT),
                          ("database or disk is full", _SQLITE_FULL), ("readonly database", _SQLITE_READONLY)):
        if needle in text:
            return found
    return None


def is_busy(exc: BaseException) -> bool:
    """Does this sqlite3 error mean a lock wait ran out?"""
    return _primary_code(exc) in (_SQLITE_BUSY, _SQLITE_LOCKED)


#: Marks an sqlite3 error raised inside an application's callback.
_APPLICATION_MARK = "_fairq_application_error"


def from_application(exc: BaseException) -> None:
    """Mark `exc`, raised by an application's callback (a settle effect, an
    Inbox apply), to reach the caller as it is rather than as a StoreError."""
    if isinstance(exc, sqlite3.Error):
        setattr(exc, _APPLICATION_MARK, True)


def raise_typed(exc: BaseException, path: object, *, classified_only: bool = False) -> None:
    """If `exc` is an sqlite3 error of fairq's own statements, raise the fairq
    error for it from `exc`: Busy, DiskFull, ReadOnly, Corrupt, or else a
    plain StoreError. Otherwise (not an sqlite3 error, or an application's
    own) return, and the caller re-raises `exc`. classified_only: return for
    an error that is none of the named ones too (opening a file, where the
    caller says what it means)."""
    if not isinstance(exc, sqlite3.Error) or getattr(exc, _APPLICATION_MARK, False):
        return
    code = _primary_code(exc)
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        raise Busy(f"{exc}: another process or connection held the write lock "
                   "past the busy timeout; nothing was written") from exc
    if code == _SQLITE_FULL:
        raise DiskFull(path, f"{path!s}: the disk or the file's size limit is full ({exc}); "
                             "nothing from this call was written: free space and call again") from exc
    if code == _SQLITE_READONLY:
        raise ReadOnly(path, f"{path!s} cannot be written ({exc}): check the permissions of the file "
                             "and its folder and that the filesystem is writable") from exc
    if code == _SQLITE_IOERR:
        raise StoreError(path, f"{path!s}: the disk failed to read or write ({exc}); what this call "
                               "wrote was rolled back: check the disk and the filesystem") from exc
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        raise Corrupt(path, f"{path!s} is damaged or is not an SQLite database ({exc}); nothing was "
                            "written: restore it from a backup (sqlite3's .recover may save rows)") from exc
    if classified_only:
        return
    raise StoreError(path, f"{path!s}: a statement failed ({type(exc).__name__}: {exc}); what this "
                           "call wrote was rolled back") from exc


@contextlib.contextmanager
def translate(path: object, *, classified_only: bool = False) -> Iterator[None]:
    """Raise the fairq error for an sqlite3 error (raise_typed); every other
    error, and an application's own sqlite3 error, passes through as it is."""
    try:
        yield
    except sqlite3.Error as exc:
        raise_typed(exc, path, classified_only=classified_only)
        raise
