"""The Queue's configuration kept in the file: the retry policy and the schema version.

QueueConfig is a base class of fairq.Queue (on QueueBase, fairq.api.base). The
retry policy lives in the file (fairq.stores.backend.Snapshot.policy,
WriteTxn.set_policy), so every process that opens it decides an event's fate
the same way; each read here reads it anew. Nothing here moves the clock.
(A flow's weight, an operator's choice, is set in fairq.api.operators.)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from .. import _validate as v
from ..errors import InvalidInput
from ..kernel.policy import Backoff, Policy, effective_now
from . import policy_args as _policy_args
from .base import QueueBase
from .requests import required_reason

log = logging.getLogger("fairq")


class QueueConfig(QueueBase):
    """The configuration verbs of fairq.Queue: the stored retry policy and the schema version."""

    @property
    def schema_version(self) -> int:
        """The schema version of the open queue, as this Queue opened it (SQLite: the
        file's user_version; PostgreSQL: the newest step in its fairq_schema table)."""
        return self._store.version

    def policy(self) -> Policy:
        """The retry policy stored in the file, read now (any process may have changed it)."""
        return self._store.read(lambda snapshot: snapshot.policy())

    @property
    def max_attempts(self) -> int:
        """The stored policy's claims per round before quarantine, read now."""
        return self.policy().max_attempts

    @property
    def backoff(self) -> Backoff:
        """The stored policy's retry delays, read now."""
        return self.policy().backoff

    @property
    def lease_seconds(self) -> float:
        """The stored policy's lease for a claim or extend that names none, read now."""
        return self.policy().lease_seconds

    def set_policy(
        self, *, max_attempts: int | None = None, backoff: Backoff | Mapping[str, Any] | None = None,
        lease_seconds: float | None = None, reason: str, actor: str | None = None,
    ) -> Policy:
        """Change the stored retry policy for every process that has the file
        open, from its next call; audited (action "policy_set", the policy
        before and after in its detail). Fields left None keep their value.
        `backoff` may be a mapping of some Backoff fields (e.g. {"cap": 60}):
        they replace those of the backoff stored when the change is written,
        so changes of other fields made meanwhile are kept.
        Returns the policy now stored; when nothing changes, no row is written.
        Does not move the stored clock.
        A new max_attempts judges events from their next claim or settle:
        one already past it is quarantined then, not at once.
        """
        partial = _backoff_changes(backoff) if isinstance(backoff, Mapping) else None
        fields = _policy_args.given(max_attempts=max_attempts, backoff=None if partial is not None else backoff,
                                    lease_seconds=lease_seconds)
        if not fields and not partial:
            raise InvalidInput("policy", "give max_attempts, backoff or lease_seconds to change")
        why = required_reason(reason)
        actor = v.optional_identifier(actor, "actor")
        reading_ms = self._requested(None)[0]
        with self._store.transaction("set_policy") as tx:
            # Configuration does not move the stored clock; the audit row gets
            # the time a call would run at now.
            now_ms = effective_now(reading_ms, tx.stored_now(), explicit=False)
            before = tx.policy()
            if partial:  # merged with the backoff stored now, in this transaction
                fields["backoff"] = dataclasses.replace(before.backoff, **partial)
            after = tx.set_policy(_policy_args.changed(before, fields), reason=why, actor=actor, now_ms=now_ms)
        if after.version != before.version:
            log.warning("retry policy changed by %s to version %d: %s (%s)", actor, after.version,
                        {name: getattr(after, name) for name in fields}, why)
        return after


def _backoff_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Some Backoff fields to change, checked as Backoff checks them (a refusal
    names "backoff.<field>")."""
    names = {f.name for f in dataclasses.fields(Backoff)}
    for key in changes:
        if key not in names:
            raise InvalidInput(f"backoff.{key}", f"is not a Backoff field ({', '.join(sorted(names))})")
    Backoff(**changes)  # each field is checked on its own
    return dict(changes)
