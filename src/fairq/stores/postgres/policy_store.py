"""The SQL of the stored retry policy on PostgreSQL: read it, seed it when the
tables are created, change it (versioned; the caller audits the change). The
row's mapping to a Policy is fairq.kernel.policy's (policy_from_row, policy_params).

The policy lives in the database (table policy, one row) so that every
process decides an event's fate the same way. Nothing here commits.
"""

from __future__ import annotations

from typing import Any

from ...kernel.policy import Policy, policy_from_row, policy_params

__all__ = ["POLICY_COLUMNS", "read_policy", "store_policy", "change_policy"]

#: The policy row's columns, in kernel.policy.POLICY_ROW's order.
POLICY_COLUMNS = ("policy.max_attempts, policy.lease_ms, policy.backoff_base_s, policy.backoff_factor, "
                  "policy.backoff_cap_s, policy.backoff_jitter, policy.version")
# The one row always exists: schema step 1 inserts it.
_SELECT = "SELECT " + POLICY_COLUMNS + " FROM policy WHERE id = 1"


def read_policy(conn: Any) -> Policy:
    """The stored policy (in conn's transaction, if any)."""
    return policy_from_row(tuple(conn.execute(_SELECT).fetchone()))


def store_policy(conn: Any, policy: Policy) -> None:
    """Store the policy of a queue being created: its first version, no audit row."""
    # The row keeps version 1: this is the policy the queue starts with.
    conn.execute(
        "UPDATE policy SET max_attempts = %(max_attempts)s, lease_ms = %(lease_ms)s, "
        "backoff_base_s = %(base)s, backoff_factor = %(factor)s, backoff_cap_s = %(cap)s, "
        "backoff_jitter = %(jitter)s WHERE id = 1",
        policy_params(policy),
    )


def change_policy(conn: Any, new: Policy) -> tuple[Policy, Policy]:
    """Store `new` as the version after the one stored; (before, after).
    Writes nothing when `new` equals what is stored. The caller audits the
    change."""
    # Locked first: two changes in flight make two versions, one after the other.
    before = policy_from_row(tuple(conn.execute(_SELECT + " FOR UPDATE").fetchone()))
    if new == before:
        return before, before
    conn.execute(
        "UPDATE policy SET max_attempts = %(max_attempts)s, lease_ms = %(lease_ms)s, "
        "backoff_base_s = %(base)s, backoff_factor = %(factor)s, backoff_cap_s = %(cap)s, "
        "backoff_jitter = %(jitter)s, version = version + 1 WHERE id = 1",
        policy_params(new),
    )
    return before, read_policy(conn)
