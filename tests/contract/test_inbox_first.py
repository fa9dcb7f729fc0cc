"""The open that creates a queue stores its policy, also where an Inbox was
opened first: an Inbox creates only its receipts, never the queue."""

from __future__ import annotations

import fairq


def test_a_queue_opened_after_an_inbox_stores_its_own_policy(store) -> None:
    target = store.target("shared")
    with store.open_inbox(target) as inbox:
        assert inbox.receive("e1", "F", 1, {}) is fairq.Receipt.ACCEPTED
    with store.open(target, max_attempts=3) as q:
        assert q.policy().max_attempts == 3 and q.policy().version == 1
    with store.open(target) as again:
        assert again.max_attempts == 3
    with store.open_inbox(target) as inbox:  # the receipts are still there, beside the queue
        assert inbox.received() == 1 and inbox.last_seq("F") == 1
