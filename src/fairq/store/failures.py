"""What an SQLite failure means: its result code, and the fairq error for it.

A lock timeout is Busy; a full disk, a file that cannot be written, a
damaged file and a failing disk are StoreErrors (DiskFull, ReadOnly, Corrupt)
with the driver's error as __cause__. Every other sqlite3 error is left as it
is, for the caller to re-raise. Knows nothing about queues or transactions.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from ..errors import Busy, Corrupt, DiskFull, ReadOnly, StoreError

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


def raise_typed(exc: BaseException, path: object) -> None:
    """If `exc` is an sqlite3 error that says something about the file (a lock
    timeout, a full disk, a read-only or damaged file), raise the fairq error
    for it from `exc`; otherwise return, and the caller re-raises `exc`."""
    if not isinstance(exc, sqlite3.DatabaseError):
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


@contextlib.contextmanager
def translate(path: object) -> Iterator[None]:
    """Raise the fairq error for a database failure (raise_typed); every other
    error passes through as it is."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise_typed(exc, path)
        raise
