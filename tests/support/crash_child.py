"""Run one relay step in a child process; FAIRQ_CRASH_AT decides where it dies.

usage: crash_child.py QUEUE_DB RECEIVER_DB relay|effect NOW

relay:  claim -> send to the receiver's Inbox -> settle (two databases).
effect: claim -> settle(ack, effect=INSERT INTO effects) (one database).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for helpers

import fairq  # noqa: E402
from helpers import Receiver, step  # noqa: E402


def main() -> int:
    queue_db, receiver_db, mode, now = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    q = fairq.Queue(queue_db, lease_seconds=5, max_attempts=3)
    if mode == "relay":
        receiver = Receiver(Path(receiver_db))
        step(q, receiver, now=now)
        return 0
    lease = q.claim(owner="child", now=now)
    q.ack(lease, effect=lambda conn: conn.execute(
        "INSERT INTO effects (event_id, amount) VALUES (:id, :amount)",
        {"id": lease.event_id, "amount": lease.body["delta"]}), now=now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
