"""The Queue's operator verbs: redrive quarantined events (one, or a chosen set),
discard events on the record, pause and resume a flow, and give a flow its weight.

QueueOperators is a base class of fairq.Queue (on QueueBase, fairq.api.base).
Each redrive item is fenced by its own expected generation and judged on its
own inside one write transaction: a refusal (RedriveRefused) is returned in
the item's slot and the others go ahead, since a refused redrive writes
nothing. A flow's weight is stored with the flow; setting it never reads or
moves the clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from .. import _validate as v
from ..errors import InvalidInput, RedriveRefused
from ..kernel.policy import MAX_WEIGHT
from ..limits import MAX_COUNT
from .base import QueueBase
from .requests import required_reason

log = logging.getLogger("fairq")


class QueueOperators(QueueBase):
    """The operator verbs of fairq.Queue: redrive, redrive_many, discard, discard_many, pause,
    resume, set_weight."""

    def redrive(
        self, event_id: str, *, expected_generation: int, reason: str, actor: str | None = None,
        now: float | None = None,
    ) -> int:
        """Give a quarantined event a new round; returns its new generation.

        Refused (RedriveRefused) unless the event is quarantined at
        expected_generation. Resets attempts (not lifetime_attempts) and
        appends an audit row that keeps the quarantine reason it replaces.
        """
        event_id = v.identifier(event_id, "event_id")
        expected_generation = v.count(expected_generation, "expected_generation", low=0, high=MAX_COUNT)
        reason = required_reason(reason)
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        with self._store.transaction("redrive") as tx:
            now_ms = tx.now(*requested)
            [generation] = tx.redrive_many([(event_id, expected_generation)], reason=reason, actor=actor,
                                           now_ms=now_ms)
        if isinstance(generation, RedriveRefused):
            raise generation
        log.info("redrive %s -> generation %d by %s: %s", event_id, generation, actor, reason)
        return generation

    def redrive_many(self, items: Iterable[Any], *, reason: str, actor: str | None = None,
                     now: float | None = None) -> list[int | RedriveRefused]:
        """Redrive each (event_id, expected_generation) pair, as redrive does
        one, in one transaction: each slot of the answer is the event's new
        generation, or the RedriveRefused that event got (not quarantined, or
        at another generation); the refused ones change nothing. One reason
        and actor for all, each redrive its own audit row."""
        checked = [_item(item, i) for i, item in enumerate(_listed(items))]
        reason = required_reason(reason)
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        with self._store.transaction("redrive") as tx:  # its crash points are redrive's
            now_ms = tx.now(*requested)
            results = tx.redrive_many(checked, reason=reason, actor=actor, now_ms=now_ms)
        done = sum(isinstance(r, int) for r in results)
        log.info("redrive_many: %d redriven, %d refused, by %s: %s", done, len(results) - done, actor, reason)
        return results

    def discard(
        self, event_id: str, *, expected_generation: int, reason: str, actor: str | None = None,
        now: float | None = None,
    ) -> int:
        """Decide, on the record, that an event will not run: a ready, waiting
        (delay or backoff) or quarantined event becomes discarded, a final
        state like acked for its flow (the next event becomes the head).
        Returns its new generation.

        Fenced like redrive: refused (RedriveRefused, saying why) unless the
        event is at expected_generation and not inflight (an inflight event
        must be settled, or its lease must end, first), acked or discarded.
        The event stays stored (get, events(state="discarded"), audit); its
        `discard` audit row keeps the reason, the actor and the state before.
        """
        event_id = v.identifier(event_id, "event_id")
        expected_generation = v.count(expected_generation, "expected_generation", low=0, high=MAX_COUNT)
        reason = required_reason(reason)
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        with self._store.transaction("discard") as tx:
            [generation] = tx.discard_many([(event_id, expected_generation)], reason=reason, actor=actor,
                                           now_ms=tx.now(*requested))
        if isinstance(generation, RedriveRefused):
            raise generation
        log.info("discard %s -> generation %d by %s: %s", event_id, generation, actor, reason)
        return generation

    def discard_many(self, items: Iterable[Any], *, reason: str, actor: str | None = None,
                     now: float | None = None) -> list[int | RedriveRefused]:
        """Discard each (event_id, expected_generation) pair, as discard does
        one, in one transaction, each fenced alone: each slot of the answer is
        the event's new generation or the RedriveRefused it got (the refused
        ones change nothing). One reason and actor for all, each discard its
        own audit row."""
        checked = [_item(item, i) for i, item in enumerate(_listed(items))]
        reason = required_reason(reason)
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        with self._store.transaction("discard") as tx:
            results = tx.discard_many(checked, reason=reason, actor=actor, now_ms=tx.now(*requested))
        done = sum(isinstance(r, int) for r in results)
        log.info("discard_many: %d discarded, %d refused, by %s: %s", done, len(results) - done, actor, reason)
        return results

    def pause(self, flow: str, *, reason: str, actor: str | None = None, now: float | None = None) -> None:
        """Stop claims of a flow's head until resume (an inflight lease runs
        on and may settle). Audited ("pause"); why_blocked and flows say who
        paused it and why. Allowed before the flow has any event; pausing a
        paused flow changes nothing."""
        self._set_paused(flow, True, required_reason(reason), actor, now)

    def resume(self, flow: str, *, reason: str | None = None, actor: str | None = None,
               now: float | None = None) -> None:
        """Let claims take a paused flow's head again, in its place in the
        rotation. Audited ("resume"); resuming a flow that is not paused
        changes nothing."""
        self._set_paused(flow, False, v.reason(reason, "reason", required=False), actor, now)

    def _set_paused(self, flow: str, paused: bool, reason: str | None, actor: Any, now: float | None) -> None:
        flow = v.identifier(flow, "flow")
        actor = v.optional_identifier(actor, "actor")
        requested = self._requested(now)
        verb = "pause" if paused else "resume"
        with self._store.transaction(verb) as tx:
            changed = tx.set_paused(flow, paused, reason=reason, actor=actor, now_ms=tx.now(*requested))
        if changed:
            log.info("%s %s by %s: %s", verb, flow, actor, reason)

    def set_weight(self, flow: str, weight: int) -> None:
        """Give a flow `weight` claims per rotation round (default 1, at most 1000).

        Allowed before the flow has any event. Does not read or move the clock.
        """
        flow = v.identifier(flow, "flow")
        weight = v.count(weight, "weight", low=1, high=MAX_WEIGHT)
        with self._store.transaction("set_weight") as tx:
            tx.set_weight(flow, weight)


def _listed(items: Iterable[Any]) -> list[Any]:
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise InvalidInput("items", "must be a list of (event_id, expected_generation) pairs")
    return list(items)


def _item(item: Any, i: int) -> tuple[str, int]:
    """One (event_id, expected_generation) pair, or a dict with those keys."""
    if isinstance(item, dict):
        unknown = set(item) - {"event_id", "expected_generation"}
        if unknown:
            raise InvalidInput(f"items[{i}].{sorted(unknown)[0]}", "is not a known key")
        for key in ("event_id", "expected_generation"):
            if key not in item:
                raise InvalidInput(f"items[{i}].{key}", "is required")
        item = (item["event_id"], item["expected_generation"])
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise InvalidInput(f"items[{i}]", "must be an (event_id, expected_generation) pair")
    return (v.identifier(item[0], f"items[{i}].event_id"),
            v.count(item[1], f"items[{i}].expected_generation", low=0, high=MAX_COUNT))
