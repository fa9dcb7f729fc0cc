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
    exits the process at once with status 128 + signal. With a `stop_timeout`,
    the first one also says at once on stderr how long the stop waits (see
    first_note). Installs nothing outside the main thread."""

    def __init__(self, signums: Sequence[int], on_second: Callable[[], None] | None = None,
                 stop_timeout: float | None = None) -> None:
        self.signums = tuple(signums) if threading.current_thread() is threading.main_thread() else ()
        self.on_second = on_second
        self.stop_timeout = stop_timeout
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
            if self.stop_timeout is not None:
                first_note(signum, self.stop_timeout)
            return
        if self.on_second is not None:
            self.on_second()
        exit_now(signum)


def first_note(signum: int, stop_timeout: float) -> None:
    """A first stop signal, said at once on stderr (a hung handler may hold the run for the
    whole stop timeout): how long the stop waits, and that a second signal stops now."""
    name = signal.Signals(signum).name
    again = "Ctrl-C" if signum == signal.SIGINT else name
    os.write(2, (f"fairq: {name}: stopping; waiting up to {stop_timeout:g} s for running handlers to finish "
                 f"(their events are then settled or their leases left to expire); {again} again to stop now\n").encode())


def exit_now(signum: int) -> None:
    """A second stop signal: say so on stderr and exit the process at once (status 128 + signal);
    its leases expire and others take over."""
    os.write(2, f"fairq: second {signal.Signals(signum).name}: exiting now; leases will expire\n".encode())
    os._exit(128 + signum)
