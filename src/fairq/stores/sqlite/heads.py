"""Where a named flow's head is, with discarded events in the flow.

A flow's head is its lowest seq that is neither acked nor discarded. Before
it, every event is acked or discarded (or purged); behind it, every event is
ready or discarded, and stored (purge removes no event behind a head). So
the head is found by a binary search over the flow's (flow_id, seq) index,
and an ack or a discard of a head finds the next one by a step along it past
discarded events. Runs on any connection; only reads.
"""

from __future__ import annotations

import sqlite3

# The first stored event of the flow after a seq that is not discarded (a
# run of discarded events is stepped over through the (flow_id, seq) index).
_NEXT_KEPT = ("SELECT state, pass FROM event WHERE flow_id = :flow_id AND seq > :seq "
              "AND state != 'discarded' ORDER BY seq LIMIT 1")


def head_seq(conn: sqlite3.Connection, flow_id: int, next_seq: int) -> int:
    """The seq of a named flow's head (next_seq: it has none)."""
    low, high = 1, next_seq
    while low < high:
        mid = (low + high) // 2
        if _before_head(conn, flow_id, mid):
            low = mid + 1
        else:
            high = mid
    return low


def _before_head(conn: sqlite3.Connection, flow_id: int, seq: int) -> bool:
    """Whether the flow's event at seq lies before its head."""
    # By the (flow_id, seq) index.
    found = conn.execute("SELECT state, pass FROM event WHERE flow_id = :flow_id AND seq = :seq",
                         {"flow_id": flow_id, "seq": seq}).fetchone()
    if found is None or found[0] == "acked":
        return True  # purged events and acked ones precede the head
    if found[0] != "discarded":
        return False  # the head, or an event behind it
    # A discarded event lies before the head iff the next event that is not
    # discarded is acked or is the head itself (or there is none).
    after = conn.execute(_NEXT_KEPT, {"flow_id": flow_id, "seq": seq}).fetchone()
    return after is None or after[0] == "acked" or after[1] is not None


# The event after a head (seq) that becomes its flow's head: the next stored
# seq that is not discarded (every event behind a head is stored, ready or
# discarded). It takes the flow's rotation place; its dispatch time is its
# ready time, or none while the flow is paused (:paused), and it is runnable
# if due then. No row: the flow is idle now.
NEXT_HEAD = (
    "UPDATE event SET pass = :pass, turn = :turn, "
    "dispatch_ms = CASE WHEN :paused THEN NULL ELSE next_at_ms END, "
    "runnable = CASE WHEN :paused THEN 0 ELSE next_at_ms <= :now_ms END "
    "WHERE flow_id = :flow_id AND seq = (SELECT seq FROM event WHERE flow_id = :flow_id AND seq > :seq "
    "AND state != 'discarded' ORDER BY seq LIMIT 1)"
)
