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

import sqlite3
from typing import TYPE_CHECKING, Any

from ..policy import Backoff, Policy, from_ms, to_ms

if TYPE_CHECKING:
    from .queue import QueueTxn

__all__ = ["read_policy", "store_policy", "PolicyTxn", "policy_json"]

# The one row always exists: queue.sql and schema step 5 insert it.
_SELECT = ("SELECT max_attempts, lease_ms, backoff_base_s, backoff_factor, backoff_cap_s, "
           "backoff_jitter, version FROM policy WHERE id = 1")


def read_policy(conn: sqlite3.Connection) -> Policy:
    """The policy stored in the file `conn` has open (in its transaction, if any)."""
    max_attempts, lease_ms, base, factor, cap, jitter, version = conn.execute(_SELECT).fetchone()
    lease_seconds = from_ms(lease_ms)
    assert lease_seconds is not None
    return Policy(max_attempts, Backoff(base, factor, cap, bool(jitter)), lease_seconds, version)


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


def policy_json(policy: Policy) -> dict[str, Any]:
    """A Policy as plain JSON values (audit detail, CLI output)."""
    b = policy.backoff
    return {"max_attempts": policy.max_attempts, "lease_seconds": policy.lease_seconds,
            "backoff": {"base": b.base, "factor": b.factor, "cap": b.cap, "jitter": b.jitter},
            "version": policy.version}


class PolicyTxn:
    """The policy statements, bound to an open queue write transaction."""

    def __init__(self, tx: QueueTxn) -> None:
        self._tx = tx

    def current(self) -> Policy:
        """The stored policy as this transaction sees it."""
        return read_policy(self._tx.connection)

    def change(self, new: Policy, *, reason: str | None, actor: str | None, now_ms: int) -> Policy:
        """Store `new` as the next version, with one audit row ("policy_set")
        holding the policy before and after; returns what is now stored.
        Writes nothing when `new` equals the stored policy."""
        before = self.current()
        if new == before:
            return before
        params = {**_params(new), "version": before.version}
        # One change, one version: the write lock is held, so the guard holds;
        # it states that the row changes from the version just read.
        changed = self._tx.connection.execute(
            "UPDATE policy SET max_attempts = :max_attempts, lease_ms = :lease_ms, "
            "backoff_base_s = :base, backoff_factor = :factor, backoff_cap_s = :cap, "
            "backoff_jitter = :jitter, version = version + 1 WHERE id = 1 AND version = :version",
            params,
        ).rowcount
        assert changed == 1
        after = self.current()
        self._tx.record("", "policy_set", reason, actor, None, now_ms,
                        {"from": policy_json(before), "to": policy_json(after)})
        return after


def _params(policy: Policy) -> dict[str, Any]:
    b = policy.backoff
    return {"max_attempts": policy.max_attempts, "lease_ms": to_ms(policy.lease_seconds),
            "base": float(b.base), "factor": float(b.factor), "cap": float(b.cap), "jitter": int(b.jitter)}
