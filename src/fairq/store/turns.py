"""Writers of every process take turns at an SQLite file through one OS lock.

SQLite makes a writer that finds the write lock taken sleep and poll (its
busy handler), so the process that just committed, awake already, usually
takes the lock again before a sleeper looks: under saturation one process
runs while the others stall. Before BEGIN IMMEDIATE a writer here waits in
the kernel instead, on an exclusive flock() of a small file beside the
database (``<file>-lock``, created on the first write, never holding data);
the kernel wakes the waiters when the holder lets go, so they are served
about in turn. The lock is held until the transaction's COMMIT or ROLLBACK.

The wait honours the busy timeout: it happens in a helper thread, and a
caller that has waited the whole timeout gets Busy (the helper gives the
lock back when it comes). Readers never take it, so they are never stopped
by it; a writer that does not take it (an application's own connection)
only makes the holder wait in SQLite's busy handler, as before. Each open
file description has its own lock, so two connections of one process take
turns too; a process made by fork() opens the file again.
"""

from __future__ import annotations

import fcntl
import os
import queue
import threading

from ..errors import Busy

SUFFIX = "-lock"


class _Request:
    """One wait handed to the helper thread."""

    __slots__ = ("fd", "granted", "abandoned", "ready")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.granted = False
        self.abandoned = False
        self.ready = threading.Event()


class WriteTurns:
    """The exclusive flock() on ``<file>-lock`` that writers queue for."""

    def __init__(self, file: str, timeout: float) -> None:
        self.path = file + SUFFIX
        self.timeout = timeout
        self._mutex = threading.Lock()  # guards _fd, _pid, _pending and a request's verdict
        self._fd: int | None = None
        self._pid = 0
        self._pending = 0  # waits the helper has not finished: the fd is theirs until then
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._helper: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lock, waiting at most the busy timeout; raise Busy after it."""
        with self._mutex:
            fd = self._open()
            if fd is None:
                return
            if not self._pending:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    pass
            request = _Request(fd)
            self._pending += 1
            self._start_helper()
        self._requests.put(request)
        request.ready.wait(self.timeout)
        with self._mutex:
            if request.granted:
                return
            request.abandoned = True  # the helper gives it back when it comes
        raise Busy(f"another process held the write lock of {self.path[:-len(SUFFIX)]} past the busy "
                   f"timeout ({self.timeout} s); nothing was written")

    def release(self) -> None:
        """Let the next writer in."""
        if self._fd is not None and self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None and self._fd >= 0 and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None
            self._pid = -1  # closed for good: no lock from here on

    def _open(self) -> int | None:
        """The lock file's descriptor (opened on the first write, and again in
        a child made by fork(), whose inherited one shares its parent's lock),
        or None where it cannot be created: then writers wait in SQLite's busy
        handler alone, as without it."""
        if self._pid == -1:
            return None
        if self._fd is None or self._pid != os.getpid():
            self._pid = os.getpid()
            self._pending = 0
            self._helper = None
            self._requests = queue.SimpleQueue()
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            except OSError:
                self._fd = -1
        return None if self._fd < 0 else self._fd

    def _start_helper(self) -> None:
        if self._helper is None:
            self._helper = threading.Thread(target=self._wait_loop, args=(self._requests,),
                                            name="fairq-write-turns", daemon=True)
            self._helper.start()

    def _wait_loop(self, requests: queue.SimpleQueue[_Request]) -> None:
        """The helper: one blocking wait at a time, in the order asked."""
        while True:
            request = requests.get()
            try:
                fcntl.flock(request.fd, fcntl.LOCK_EX)
                failed = False
            except OSError:  # the descriptor was closed under the wait
                failed = True
            with self._mutex:
                self._pending -= 1
                if request.abandoned and not failed:
                    fcntl.flock(request.fd, fcntl.LOCK_UN)
                else:
                    request.granted = not failed
            request.ready.set()


def open_turns(file: str, timeout: float) -> WriteTurns | None:
    """The turns of a database file, or None for a temporary or in-memory
    database (no file beside which to keep the lock)."""
    return WriteTurns(file, timeout) if file else None
