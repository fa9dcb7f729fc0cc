"""Writers of every process take turns at an SQLite file through one OS lock.

SQLite makes a writer that finds the write lock taken sleep and poll (its
busy handler), so the process that just committed, awake already, usually
takes the lock again before a sleeper looks: under saturation one process
runs while the others stall. Here every fairq writer holds an exclusive
flock() of a small file beside the database (``<file>-lock``, created on
the first write; it holds only a count of the turns taken) from before its
BEGIN IMMEDIATE until its COMMIT or ROLLBACK, and who may take it is ruled
by how long each writer has been passed over:

* A writer that wants the lock again within PAUSED of its last turn (a
  process writing without a break) is due once BYPASS turns of other
  writers have been taken since that turn (or LONGEST_WAIT has passed);
  any other writer (one coming back after a pause, or new) is due at once.
  A due writer that finds the lock taken says so with a shared POSIX record
  lock on the lock file's first byte (the kernel drops it if the process
  dies) and waits in the kernel's queue for the flock.
* A writer that is not due takes the lock only when it is free and no
  other process is due; otherwise it sleeps until about when it will be
  due and looks again (it is not in the kernel's queue, so a release does
  not wake it).

So a process that keeps writing goes on while the others are not due,
instead of handing the lock to another process at every transaction: each
hand-over costs a wake-up, and the new holder re-reads the pages SQLite's
cache lost to the other process's writes. A writer coming back after a
pause is served after the transaction in progress (and the other due
ones), and none is passed over by more than BYPASS turns of writers that
are not due, plus those taken while it slept. The lock is never kept
between transactions: the application's own code never runs holding it.

The waits honour the busy timeout: the kernel wait happens in a helper
thread, and a caller that has waited the whole timeout gets Busy (the
helper gives the lock back when it comes). Readers never take the lock, so
they are never stopped by it; a writer that does not take it (an
application's own connection) only makes the holder wait in SQLite's busy
handler, as before. Each open file description has its own flock, so two
connections of one process take turns too; a process made by fork() opens
the file again. Being due is said per process (record locks are), so a
process with two connections to one file says it once for both.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import queue
import struct
import sys
import threading
import time

from ...errors import Busy

SUFFIX = "-lock"

#: Turns of other writers after which a writer that wants the lock is served
#: ahead of every writer that is not due.
BYPASS = 32
#: A writer whose last turn is this old (seconds) is due whatever the count
#: says (writers of an older fairq take turns without counting them).
LONGEST_WAIT = 0.1
#: A writer that did not want the lock for this long after its last turn
#: (seconds) is due as soon as it wants it again.
PAUSED = 0.001
#: A writer that is not due first looks again after FIRST_PAUSE, then
#: sleeps until about when it will be due, at most LONGEST_PAUSE at a time.
FIRST_PAUSE = 0.0001
LONGEST_PAUSE = 0.005


class _Due:
    """This process's due writers, by lock file (st_dev, st_ino): the record
    lock that says so is the process's own, held while any of them waits."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.waiting: dict[tuple[int, int], int] = {}


_due = _Due()
# This process's id, kept up to date across fork() (asking the kernel at every turn costs a system call).
_pid = [os.getpid()]
if hasattr(os, "register_at_fork"):
    def _forget_due() -> None:
        global _due
        _due = _Due()  # a child made by fork() holds none of its parent's record locks
        _pid[0] = os.getpid()
    os.register_at_fork(after_in_child=_forget_due)

# Where the kernel says who holds a record lock without taking it (F_GETLK:
# one system call where a test lock and its release are two), the layout
# of Linux's struct flock on a 64-bit build: l_type, l_whence, l_start,
# l_len, l_pid. Elsewhere the test lock is taken and given back.
_GETLK: bytes | None = (
    struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)  # a write lock of the first byte
    if sys.platform == "linux" and struct.calcsize("l") == 8 else None
)
_UNLOCKED = struct.pack("h", fcntl.F_UNLCK)  # l_type of the answer: nothing conflicts


class _Request:
    """One wait handed to the helper thread."""

    __slots__ = ("fd", "granted", "abandoned", "ready")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.granted = False
        self.abandoned = False
        self.ready = threading.Event()


class WriteTurns:
    """The exclusive flock() on ``<file>-lock`` that writers take turns at."""

    def __init__(self, file: str, timeout: float) -> None:
        self.path = file + SUFFIX
        self.timeout = timeout
        self._mutex = threading.Lock()  # guards _fd, _pid, _pending and a request's verdict
        self._fd: int | None = None
        self._pid = 0
        # The turn count, mapped from the lock file's first 8 bytes where it can
        # be (reading and adding to it then costs no system call); None: pread/pwrite.
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._key = (0, 0)
        self._last_count: int | None = None  # the turn count after this connection's last turn
        self._last_time = 0.0  # and when it let the lock go
        self._came_back = True  # the writer waiting now did not want the lock for PAUSED before
        self._pending = 0  # waits the helper has not finished: the fd is theirs until then
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._helper: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lock, waiting at most the busy timeout; raise Busy after it."""
        start = time.monotonic()
        self._came_back = start - self._last_time >= PAUSED
        taken, left = self._look(start)
        if taken:
            return
        deadline = start + self.timeout
        pause = FIRST_PAUSE
        while left > 0 and (now := time.monotonic()) < deadline:
            time.sleep(min(pause, deadline - now))
            now = time.monotonic()
            taken, left = self._look(now)
            if taken:
                return
            # Until about when it will be due, at the pace turns have been taken.
            passed = BYPASS - left
            pace = (now - self._last_time) / passed if passed > 0 else now - start
            pause = min(max(left * pace, FIRST_PAUSE), LONGEST_PAUSE)
        self._queue(deadline)

    def release(self) -> None:
        """Count the turn and let the next writer in."""
        fd = self._fd
        if fd is None or fd < 0:
            return
        view = self._view
        if view is not None:  # the holder alone adds to the count: no lost update
            view[0] = self._last_count = view[0] + 1
        else:
            try:
                count = _count(fd) + 1
                os.pwrite(fd, count.to_bytes(8, "little"), 0)
                self._last_count = count
            except OSError:  # not counted (a full disk): the others' LONGEST_WAIT still holds
                pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        self._last_time = time.monotonic()

    def close(self) -> None:
        with self._mutex:
            if self._fd is not None and self._fd >= 0 and self._pid == _pid[0]:
                self._unmap()
                os.close(self._fd)
            self._fd = None
            self._pid = -1  # closed for good: no lock from here on

    # -- taking it ------------------------------------------------------------

    def _look(self, now: float) -> tuple[bool, int]:
        """(taken, left): take the lock if it is free and this writer is due
        or no other process is; left is how many more turns of others make
        it due, 0 if it is (taken is also True where there is no lock)."""
        with self._mutex:
            fd = self._open()
            if fd is None:
                return True, 0
            last = self._last_count
            if last is None or self._came_back or now - self._last_time >= LONGEST_WAIT:
                left = 0
            else:
                view = self._view
                try:
                    left = BYPASS - ((view[0] if view is not None else _count(fd)) - last)
                except OSError:  # the count cannot be read: wait in the kernel's queue
                    left = 0
                if left < 0:
                    left = 0
            if self._pending or (left and self._others_due(fd)):
                return False, left
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False, left
            return True, left

    def _queue(self, deadline: float) -> None:
        """Wait in the kernel's queue for the lock, said due, until the deadline."""
        with self._mutex:
            fd = self._open()
            if fd is None:
                return
            request = _Request(fd)
            self._pending += 1
            self._start_helper()
        self._say_due(fd, True)
        try:
            self._requests.put(request)
            request.ready.wait(max(0.0, deadline - time.monotonic()))
            with self._mutex:
                if request.granted:
                    return
                request.abandoned = True  # the helper gives it back when it comes
        finally:
            self._say_due(fd, False)
        raise Busy(f"another process held the write lock of {self.path[:-len(SUFFIX)]} past the busy "
                   f"timeout ({self.timeout} s); nothing was written")

    # -- being due --------------------------------------------------------------

    def _others_due(self, fd: int) -> bool:
        """Whether a writer of another process (or another connection of this
        one) is due: holds the shared record lock on the first byte."""
        due = _due
        if _GETLK is not None:  # a question, which changes no lock: no need to hold the mutex
            if due.waiting.get(self._key):
                return True
            try:
                # Would a lock of the byte conflict? (The kernel answers F_UNLCK when free.)
                return fcntl.fcntl(fd, fcntl.F_GETLK, _GETLK)[:2] != _UNLOCKED
            except OSError:
                return True
        with due.mutex:
            if due.waiting.get(self._key):
                return True
            try:
                # A test lock, given back at once: refused while another process holds the byte.
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                return True
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            return False

    def _say_due(self, fd: int, due_now: bool) -> None:
        due = _due
        with due.mutex:
            count = due.waiting.get(self._key, 0) + (1 if due_now else -1)
            try:
                if due_now and count == 1:
                    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0)
                elif not due_now and count == 0:
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            except OSError:  # not said: the wait goes on in the kernel's queue alone
                pass
            if count > 0:
                due.waiting[self._key] = count
            else:
                due.waiting.pop(self._key, None)

    # -- the file and the helper -------------------------------------------------

    def _open(self) -> int | None:
        """The lock file's descriptor (opened on the first write, and again in
        a child made by fork(), whose inherited one shares its parent's lock),
        or None where it cannot be created: then writers wait in SQLite's busy
        handler alone, as without it."""
        if self._pid == -1:
            return None
        if self._fd is None or self._pid != _pid[0]:
            self._pid = _pid[0]
            self._pending = 0
            self._helper = None
            self._requests = queue.SimpleQueue()
            self._map = self._view = None  # a parent's mapping: this process maps the file again
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
                stat = os.fstat(self._fd)
                self._key = (stat.st_dev, stat.st_ino)
            except OSError:
                self._fd = -1
            else:
                self._map_count(stat.st_size)
        return None if self._fd < 0 else self._fd

    def _map_count(self, size: int) -> None:
        """Map the count (8 bytes, little-endian, as every fairq writes it);
        where that fails, the count is read and written with pread/pwrite."""
        if sys.byteorder != "little" or self._fd is None:
            return
        try:
            if size < 8:
                # Zeros up to 8 bytes; a count another process wrote meanwhile is kept.
                os.ftruncate(self._fd, 8)
            self._map = mmap.mmap(self._fd, 8)
            self._view = memoryview(self._map).cast("Q")
        except (OSError, ValueError):
            self._unmap()

    def _unmap(self) -> None:
        if self._view is not None:
            self._view.release()
        if self._map is not None:
            self._map.close()
        self._map = self._view = None

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


def _count(fd: int) -> int:
    """Turns taken at the file so far (by writers that count them)."""
    return int.from_bytes(os.pread(fd, 8, 0).ljust(8, b"\0"), "little")


def open_turns(file: str, timeout: float) -> WriteTurns | None:
    """The turns of a database file, or None for a temporary or in-memory
    database (no file beside which to keep the lock)."""
    return WriteTurns(file, timeout) if file else None
