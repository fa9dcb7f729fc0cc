"""Queue.result and Queue.wait: what an acked event's handler returned, now or
once the event ends.

A result is stored in the ack's own transaction (Queue.ack(result=...), a
worker's handler that returns a value); result() reads it with the event's
state in one snapshot. wait() blocks until the event is acked (its result),
quarantined or discarded (ResultNotReady naming the state and reason), or
its timeout passes (TimeoutError). On a store that tells of settled events
(PostgreSQL: NOTIFY to a waiter that registered first, through one listening
connection per Queue opened on the first wait) the wait sleeps until told,
looking again every RECHECK seconds; on one that does not (SQLite) it polls,
backing off from POLL_FIRST to POLL_MAX. QueueResults is a base class of
fairq.Queue (on QueueBase). No SQL here, and no database named.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .. import _validate as v
from .._json import body_value
from ..errors import InvalidInput, ResultNotReady
from ..stores.backend import ResultWaits, StoredResult
from ..types import Outcome, State
from .base import QueueBase

__all__ = ["QueueResults", "result_text", "FINAL"]

#: Polling (SQLite, or no listening connection): the first pause, doubling to the last.
POLL_FIRST, POLL_MAX = 0.001, 0.1
#: While listening: look again this often anyway (an event that ended in a
#: transaction that tells no one, e.g. an expired lease's last attempt).
RECHECK = 1.0
#: The states an event never leaves by itself: a wait ends on them.
FINAL = frozenset({State.ACKED, State.QUARANTINED, State.DISCARDED})


def result_text(value: Any, outcome: Outcome, max_bytes: int) -> str | None:
    """The canonical JSON of a settle's result (None: no result); only an ack
    takes one, a JSON value of at most max_bytes (InvalidInput naming "result")."""
    if value is None:
        return None
    if outcome is not Outcome.ACK:
        raise InvalidInput("result", f"only an ack takes a result, not a {outcome.value}")
    return v.body(value, "result", max_bytes=max_bytes)


def answer(event_id: str, found: StoredResult | None) -> Any:
    """The result of an acked event (None: acked without one); else ResultNotReady."""
    if found is None:
        raise ResultNotReady(event_id, None)
    if found.state is not State.ACKED:
        raise ResultNotReady(event_id, found.state, found.reason)
    return None if found.body is None else body_value(found.body)


class QueueResults(QueueBase):
    """The result and wait verbs of fairq.Queue."""

    _result_waits: ResultWaits | None = None
    _results_closed = False
    _results_lock = threading.Lock()

    def result(self, event_id: str) -> Any:
        """The result stored with the event's ack: the JSON value its handler
        returned (or Queue.ack(result=...) gave), None if it was acked without one.

        Raises ResultNotReady when the event is not acked: `.state` is its
        state (ready, inflight, quarantined, discarded), `.reason` why it was
        quarantined or discarded; state None when no such event is stored
        (never enqueued, or purged with its result).
        """
        event_id = v.identifier(event_id, "event_id")
        return answer(event_id, self._store.read(lambda reads: reads.result(event_id)))

    def wait(self, event_id: str, *, timeout: float) -> Any:
        """Block until the event is acked and return its result (as result()).

        Raises ResultNotReady once it is quarantined or discarded (with its
        state and reason; a redrive would start it again, so the wait ends),
        or at once when no such event is stored; the builtin TimeoutError when
        `timeout` seconds pass first. On PostgreSQL the wait sleeps until the
        settle that ends the event tells it (LISTEN/NOTIFY, only to events
        someone waits for); on SQLite it polls, from 1 ms doubling to 100 ms.
        """
        event_id = v.identifier(event_id, "event_id")
        timeout = v.seconds(timeout, "timeout")
        deadline = time.monotonic() + timeout
        waits = self._waits_for_results()
        token = None if waits is None else waits.register(event_id)
        try:
            # Registered first: this look sees every settle that did not hear of the wait.
            found = (self._store.settled_look(event_id) if token is not None
                     else self._store.read(lambda reads: reads.result(event_id)))
            pause = POLL_FIRST
            while found is not None and found.state not in FINAL:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"event {event_id!r} is still {found.state.value} after {timeout} s")
                if waits is not None and token is not None:
                    waits.wait(token, min(left, RECHECK))
                else:
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, POLL_MAX)
                found = self._store.read(lambda reads: reads.result(event_id))
            return answer(event_id, found)
        finally:
            if waits is not None and token is not None:
                waits.unregister(token)

    def _waits_for_results(self) -> ResultWaits | None:
        """This Queue's listener for settled events (started on first use), or None."""
        with self._results_lock:
            if self._result_waits is None and not self._results_closed:
                self._result_waits = self._store.result_waits()
            return self._result_waits

    def _close_results(self) -> None:
        """Stop listening (Queue.close)."""
        with self._results_lock:
            self._results_closed = True
            waits, self._result_waits = self._result_waits, None
        if waits is not None:
            waits.close()
