"""A process whose threads make write calls at once on one Queue, for crash tests.

    python group_child.py DB group N      # one forced group: an ack holding the
                                          # connection until N-1 enqueues wait, then one COMMIT
    python group_child.py DB stream N     # N threads enqueueing until killed

Each thread writes "done <event id>" to stdout only after its call returned,
so a line is a caller told "done". Crash points come from FAIRQ_CRASH_AT.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import time

import fairq

_out = threading.Lock()


def told(event_id: str) -> None:
    with _out:
        sys.stdout.write(f"done {event_id}\n")
        sys.stdout.flush()


def group(q: fairq.Queue, n: int) -> None:
    lease = q.claim()
    assert lease is not None
    writers = q._store.db.writers  # type: ignore[attr-defined]
    started = threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        deadline = time.monotonic() + 30
        while writers.waiting < n - 1 and time.monotonic() < deadline:
            time.sleep(0.001)

    def member(i: int) -> None:
        started.wait(30)
        q.enqueue(f"m{i}", {"i": i}, flow=f"f{i}")
        told(f"m{i}")

    threads = [threading.Thread(target=member, args=(i,)) for i in range(n - 1)]
    for t in threads:
        t.start()
    q.ack(lease, effect=hold)
    told(lease.event_id)
    for t in threads:
        t.join()


def stream(q: fairq.Queue, n: int) -> None:
    def loop(t: int) -> None:
        i = 0
        while True:
            q.enqueue(f"t{t}-{i}", {"i": i}, flow=f"f{t}")
            told(f"t{t}-{i}")
            i += 1

    threads = [threading.Thread(target=loop, args=(t,), daemon=True) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    queue = fairq.Queue(path)
    (group if mode == "group" else stream)(queue, n)
