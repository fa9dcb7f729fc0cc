"""New event ids for an enqueue without one: UUIDv7 strings (RFC 9562).

An id is 48 bits of Unix milliseconds, a 12-bit counter that keeps ids made
in one process strictly increasing within a millisecond, and 62 random bits
that keep ids made by different processes apart. Ids sort as text in the
order they were made (within a process; across processes, to the
millisecond). No SQL; reads the system clock, not the queue's.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_event_id"]

_lock = threading.Lock()
_last = [0, 0]  # [milliseconds, counter] of the last id made in this process


def new_event_id() -> str:
    """A new unique, time-ordered id such as "0192f0c4-6b1e-7000-8a3c-5d2e9f1b7c44"."""
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last[0]:
            _last[0], _last[1] = ms, 0
        elif _last[1] < 0xFFF:
            _last[1] += 1
        else:  # 4096 ids in one millisecond: borrow the next one
            _last[0], _last[1] = _last[0] + 1, 0
        ms, counter = _last
    random = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | random
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
