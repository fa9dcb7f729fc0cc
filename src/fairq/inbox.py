"""The receiving end of a relay: each delivery's effect happens once.

An Inbox keeps receipts in the receiver's own SQLite database (or, for a
postgresql:// URL, its PostgreSQL schema), through the store's InboxStore
(fairq.stores.open_inbox picks it). receive()
checks a delivery against them and, only for a new event that is next in its
flow, runs the caller's effect and writes the receipt in the same
transaction. A sender that retries after a crash gets DUPLICATE, never a
second effect. No SQL lives here, and no database is named.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from . import _validate as v
from .errors import InvalidInput
from .kernel.policy import to_ms
from .limits import MAX_BODY_CEILING, MAX_COUNT
from .stores import open_inbox
from .types import Receipt

__all__ = ["Inbox"]


class Inbox:
    """Receiver-side deduplication and in-order effects, in the receiver's database.

    The file may hold the application's own tables (the effect writes them);
    the inbox only adds tables named fairq_*.
    """

    def __init__(
        self, path: Any, *, synchronous: str = "full", busy_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._store = open_inbox(path, synchronous=synchronous, busy_timeout=busy_timeout)

    def receive(
        self, event_id: str, flow: str | None, seq: int, body: Any, *,
        apply: Callable[[sqlite3.Connection], Any] | None = None,
    ) -> Receipt:
        """Accept a delivery once, in flow order, with its effect.

        ACCEPTED: new and next in its flow; apply(conn) ran and the receipt
        was written in the same transaction. DUPLICATE: this exact event was
        accepted before; nothing ran. ID_CONFLICT: the id was accepted with a
        different flow, seq or body. SEQUENCE_CONFLICT: another event already
        holds this seq. GAP: an earlier seq of the flow has not arrived yet.
        If apply raises, nothing is written and the error propagates.
        """
        event_id = v.identifier(event_id, "event_id")
        flow = v.optional_identifier(flow, "flow")
        seq = v.count(seq, "seq", low=1, high=MAX_COUNT)
        text = v.body(body, "body", max_bytes=MAX_BODY_CEILING)
        if apply is not None and not callable(apply):
            raise InvalidInput("apply", "must be callable")
        return self._store.receive(event_id, flow, seq, text, apply, to_ms(self._clock()))

    def received(self, flow: str | None = None) -> int:
        """How many deliveries were accepted (in one flow, or in all)."""
        return self._store.count(v.optional_identifier(flow, "flow"))

    def last_seq(self, flow: str) -> int:
        """The highest seq accepted in a flow (0 when none)."""
        return self._store.last_seq(v.identifier(flow, "flow"))

    def close(self) -> None:
        """Close the connection."""
        self._store.close()

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
