"""The reading thread both LISTEN connections of the PostgreSQL store share
(wake-ups for idle workers: listen.Listener; waits for events to end:
result_listen.ResultListener): started on first use, reconnecting with a
doubling pause while the connection cannot be made or breaks, ended by
close() within one read slice. A subclass reads its channels in _listen()
(connect, LISTEN, set `_listening` under `_cond`, read until closed or the
connection fails; the connection kept in `_conn`), and _drop() forgets it;
nothing here reads or writes queue rows."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

log = logging.getLogger("fairq")

#: Seconds the reading thread blocks per read, so close() ends it soon after.
READ_SLICE = 0.05
#: Seconds between reconnection attempts: doubling from the first to the second.
RECONNECT_MIN, RECONNECT_MAX = 0.05, 5.0


class ListenThread:
    """One daemon thread keeping one LISTEN connection; `_cond` guards the state."""

    #: The reading thread's name.
    thread_name = "fairq-listen"

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._listening = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._conn: Any = None  # the listening connection, while there is one

    def close(self) -> None:
        """Stop listening: the thread ends within READ_SLICE and closes its connection."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(READ_SLICE + 1.0)

    def _start(self) -> None:
        with self._cond:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()
            # Give the connection a moment, so the first wait already listens.
            self._cond.wait_for(lambda: self._listening or self._closed, timeout=1.0)

    def _run(self) -> None:
        pause = RECONNECT_MIN
        while not self._closed:
            try:
                self._listen()
                pause = RECONNECT_MIN
            except Exception as exc:  # the driver's error: the connection is gone, try again later
                if self._closed:
                    break
                log.warning("listen.lost thread=%s error=%r retry_in=%.2f", self.thread_name,
                            f"{type(exc).__name__}: {exc}", pause)
            finally:
                self._drop()
            end = time.monotonic() + pause
            with self._cond:
                while not self._closed and time.monotonic() < end:
                    self._cond.wait(end - time.monotonic())
            pause = min(pause * 2, RECONNECT_MAX)

    def _listen(self) -> None:
        raise NotImplementedError

    def _drop(self) -> None:
        """Not listening any more: waiters learn it, the connection is closed."""
        with self._cond:
            self._listening = False
            self._cond.notify_all()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a broken connection: nothing left to do
                pass
