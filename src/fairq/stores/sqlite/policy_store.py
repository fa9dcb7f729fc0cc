"""The SQL of the stored retry policy: read it, seed it when the file is
created, change it (versioned; the caller audits the change). The row's
mapping to a Policy is fairq.kernel.policy's (policy_from_row, policy_params).

The policy lives in the file (table policy, one row) so that every process
that opens it decides an event's fate the same way. Verbs that need it
(claim, settle, extend) read it inside their own write transaction: one
primary-key read of a one-row table, so a change committed by any process
applies from the next call, with no extra round trip. Nothing here commits
or reads a wall clock.
"""

from __future__ import annotations

import sqlite3

from ...kernel.policy import Policy, policy_from_row, policy_params

__all__ = ["read_policy", "store_policy", "change_policy"]

# The one row always exists: queue.sql and schema step 5 insert it. Its
# columns in kernel.policy.POLICY_ROW's order.
_SELECT = ("SELECT max_attempts, lease_ms, backoff_base_s, backoff_factor, backoff_cap_s, "
           "backoff_jitter, version FROM policy WHERE id = 1")


def read_policy(conn: sqlite3.Connection) -> Policy:
    """The policy stored in the file `conn` has open (in its transaction, if any)."""
    return policy_from_row(tuple(conn.execute(_SELECT).fetchone()))


def store_policy(conn: sqlite3.Connection, policy: Policy) -> None:
    """Store the policy of a file being created or upgraded (schema migration's
    seed): its first version, so no audit row."""
    # The row keeps version 1: this is the policy the file starts with.
    conn.execute(
        "UPDATE policy SET max_attempts = :max_attempts, lease_ms = :lease_ms, "
        "backoff_base_s = :base, backoff_factor = :factor, backoff_cap_s = :cap, "
        "backoff_jitter = :jitter WHERE id = 1",
        policy_params(policy),
    )


def change_policy(conn: sqlite3.Connection, new: Policy) -> tuple[Policy, Policy]:
    """Store `new` as the version after the one stored; (before, after).
    Writes nothing when `new` equals what is stored. The caller audits the
    change. Runs under the file's write lock."""
    before = read_policy(conn)
    if new == before:
        return before, before
    # One change, one version: the write lock is held, so the guard holds;
    # it states that the row changes from the version just read.
    changed = conn.execute(
        "UPDATE policy SET max_attempts = :max_attempts, lease_ms = :lease_ms, "
        "backoff_base_s = :base, backoff_factor = :factor, backoff_cap_s = :cap, "
        "backoff_jitter = :jitter, version = version + 1 WHERE id = 1 AND version = :version",
        {**policy_params(new), "version": before.version},
    ).rowcount
    assert changed == 1
    return before, read_policy(conn)
