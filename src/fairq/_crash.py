"""Named crash points, so tests can kill a real process at the worst moment.

Set FAIRQ_CRASH_AT to a point name (e.g. ``settle.before_commit``) in a
child process's environment; when that process reaches the point it exits at
once with os._exit(FAIRQ_CRASH_CODE, default 86): no finally blocks, no
rollback, no flush. Unset, a point costs one attribute lookup and a compare.

Every write transaction passes ``<verb>.before_commit`` and
``<verb>.after_commit``; docs/guarantees.md lists the verbs.
"""

from __future__ import annotations

import os

ARMED: str | None = os.environ.get("FAIRQ_CRASH_AT") or None
EXIT_CODE = int(os.environ.get("FAIRQ_CRASH_CODE", "86"))


def point(verb: str, stage: str) -> None:
    """Exit the process immediately if FAIRQ_CRASH_AT names `verb.stage`."""
    if ARMED is not None and ARMED == f"{verb}.{stage}":
        os._exit(EXIT_CODE)
