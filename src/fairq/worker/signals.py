"""Stop signals for a run loop: the first is recorded, a second exits the process."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any


class StopSignals:
    """``with StopSignals(signums) as received:`` -- while inside, the first of
    these signals is recorded in `received.signum` (run loops poll it; a
    signal handler must not take locks); a second one calls `on_second` and
    exits the process at once with status 128 + signal. Installs nothing
    outside the main thread."""

    def __init__(self, signums: Sequence[int], on_second: Callable[[], None] | None = None) -> None:
        self.signums = tuple(signums) if threading.current_thread() is threading.main_thread() else ()
        self.on_second = on_second
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in self.signums:
            self._previous[signum] = signal.signal(signum, self._received)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _received(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
            return
        if self.on_second is not None:
            self.on_second()
        exit_now(signum)


def exit_now(signum: int) -> None:
    """A second stop signal: say so on stderr and exit the process at once (status 128 + signal);
    its leases expire and others take over."""
    os.write(2, f"fairq: second {signal.Signals(signum).name}: exiting now; leases will expire\n".encode())
    os._exit(128 + signum)
