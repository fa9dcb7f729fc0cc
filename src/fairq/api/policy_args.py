"""The facade's side of the stored retry policy: validate what an opener or
set_policy gives, and judge an open against the policy the file stores.

Only arguments given explicitly (not None) count; the others come from the
file. No SQL, no clock: fairq.stores.sqlite.policy_store reads and writes the row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import _validate as v
from ..errors import InvalidInput, PolicyMismatch
from ..kernel.policy import Backoff, Policy, from_ms, to_ms

__all__ = ["given", "check", "changed"]

#: The order fields are judged in, and the keyword each is given by.
FIELDS = ("max_attempts", "backoff", "lease_seconds")


def given(*, max_attempts: Any, backoff: Any, lease_seconds: Any) -> dict[str, Any]:
    """The policy fields given explicitly (not None), validated; lease_seconds
    rounded to the millisecond the file stores."""
    out: dict[str, Any] = {}
    if max_attempts is not None:
        out["max_attempts"] = v.count(max_attempts, "max_attempts", low=1, high=1_000_000)
    if backoff is not None:
        if not isinstance(backoff, Backoff):
            raise InvalidInput("backoff", f"must be a fairq.Backoff, not {type(backoff).__name__}")
        out["backoff"] = backoff
    if lease_seconds is not None:
        seconds = v.seconds(lease_seconds, "lease_seconds", positive=True)
        if to_ms(seconds) < 1:
            raise InvalidInput("lease_seconds", f"must be at least 0.001 (a millisecond), got {seconds!r}")
        out["lease_seconds"] = from_ms(to_ms(seconds))
    return out


def check(stored: Policy, fields: dict[str, Any]) -> None:
    """Refuse (PolicyMismatch, naming the first field that differs) an open
    whose explicit fields are not the stored ones."""
    for name in FIELDS:
        if name in fields and fields[name] != getattr(stored, name):
            raise PolicyMismatch(name, getattr(stored, name), fields[name])


def changed(stored: Policy, fields: dict[str, Any]) -> Policy:
    """The stored policy with the given fields replaced (version unchanged)."""
    return dataclasses.replace(stored, **fields)
