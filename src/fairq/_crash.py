"""Named crash and freeze points, so tests can kill or stop a real process at the worst moment.

Set FAIRQ_CRASH_AT to a point name (e.g. ``settle.before_commit``) in a
child process's environment; when that process reaches the point it exits at
once with os._exit(FAIRQ_CRASH_CODE, default 86): no finally blocks, no
rollback, no flush.

Set FAIRQ_FREEZE_AT to a point name instead and the process stops itself
there with SIGSTOP, as a paused VM or a host gone without a TCP reset would:
its transaction stays open and its connection keeps every lock it holds,
until the test sends SIGCONT or SIGKILL. Unset, a point costs one attribute
lookup and a compare.

Every write transaction passes ``<verb>.before_commit`` (its bookkeeping
written, COMMIT not yet sent) and ``<verb>.after_commit``; docs/guarantees.md
lists the verbs. A settle with an effect also passes ``settle.after_effect``.
"""

from __future__ import annotations

import os
import signal

ARMED: str | None = os.environ.get("FAIRQ_CRASH_AT") or None
FROZEN: str | None = os.environ.get("FAIRQ_FREEZE_AT") or None
EXIT_CODE = int(os.environ.get("FAIRQ_CRASH_CODE", "86"))


def point(verb: str, stage: str) -> None:
    """Exit the process immediately if FAIRQ_CRASH_AT names `verb.stage`;
    stop it (SIGSTOP) if FAIRQ_FREEZE_AT does."""
    if ARMED is None and FROZEN is None:
        return
    here = f"{verb}.{stage}"
    if here == ARMED:
        os._exit(EXIT_CODE)
    if here == FROZEN:
        os.kill(os.getpid(), signal.SIGSTOP)
