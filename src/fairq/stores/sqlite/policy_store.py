"""The SQL of the stored retry policy: read it, store it when the file is
created, change it with an audit row.

The policy lives in the file (table policy, one row) so that every process
that opens it decides an event's fate the same way. Verbs that need it
(claim, settle, extend) read it inside their own write transaction: one
primary-key read of a one-row table, so a change committed by any process
applies from the next call, with no extra round trip. Nothing here commits
or reads a wall clock.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from ...kernel.policy import Backoff, Policy, from_ms, to_ms

__all__ = ["policy_from_row", "read_policy", "store_policy", "change_policy"]

# The one row always exists: queue.sql and schema step 5 insert it.
_SELECT = ("SELECT max_attempts, lease_ms, backoff_base_s, backoff_factor, backoff_cap_s, "
           "backoff_jitter, version FROM policy WHERE id = 1")


@functools.lru_cache(maxsize=8)
def policy_from_row(row: tuple[Any, ...]) -> Policy:
    """A Policy from the policy row's columns, in _SELECT's order."""
    max_attempts, lease_ms, base, factor, cap, jitter, version = row
    lease_seconds = from_ms(lease_ms)
    assert lease_seconds is not None
    return Policy(max_attempts, Backoff(base, factor, cap, bool(jitter)), lease_seconds, version)


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
        _params(policy),
    )


def change_policy(conn: sqlite3.Connection, before: Policy, new: Policy) -> Policy:
    """Store `new` as the version after `before` (the policy this transaction
    read); returns what is now stored. Writes nothing when `new` equals
    `before`. The caller audits the change."""
    if new == before:
        return before
    params = {**_params(new), "version": before.version}
    # One change, one version: the write lock is held, so the guard holds;
    # it states that the row changes from the version just read.
    changed = conn.execute(
        "UPDATE policy SET max_attempts = :max_attempts, lease_ms = :lease_ms, "
        "backoff_base_s = :base, backoff_factor = :factor, backoff_cap_s = :cap, "
        "backoff_jitter = :jitter, version = version + 1 WHERE id = 1 AND version = :version",
        params,
    ).rowcount
    assert changed == 1
    return read_policy(conn)


def _params(policy: Policy) -> dict[str, Any]:
    b = policy.backoff
    return {"max_attempts": policy.max_attempts, "lease_ms": to_ms(policy.lease_seconds),
            "base": float(b.base), "factor": float(b.factor), "cap": float(b.cap), "jitter": int(b.jitter)}
