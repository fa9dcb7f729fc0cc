"""Freeze (SIGSTOP) a process inside a PostgreSQL write, holding its locks.

usage: pg_frozen_child.py URL claim|settle|effect LEASE_SECONDS

claim:  claim one head; FAIRQ_FREEZE_AT=claim.before_commit stops it with
        the heads it promoted and took still locked.
settle: claim one head and ack it; FAIRQ_FREEZE_AT=settle.before_commit
        stops it with the flow, the head and the counters written.
effect: claim one head and ack it with an effect that stops the process
        (the flow and the head locked by the fence check).

The parent waits for the stop, then SIGKILLs it; the server rolls back.
"""

from __future__ import annotations

import os
import signal
import sys

import fairq


def main() -> int:
    url, mode, lease_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    q = fairq.Queue(url)
    lease = q.claim(owner="frozen", lease_seconds=lease_seconds)
    if lease is None:
        return 3
    if mode == "settle":
        q.ack(lease)
    elif mode == "effect":
        q.ack(lease, effect=lambda conn: os.kill(os.getpid(), signal.SIGSTOP))
    return 0


if __name__ == "__main__":
    sys.exit(main())
