"""Periodic schedules: which slots exist, what a tick does with them, and q.schedules.

A schedule names a sequence of slots, nominal fire instants kept as UTC
milliseconds: ``start + k * every``, or the matches of a cron expression read
in a time zone. A tick decides each slot once, in order, resuming from the
position stored with the schedule: the slot becomes an instance (an ordinary
event ``"{name}@{slot}"``, due at its slot, with the normal lease, fence,
retry and quarantine) or a misfire (an audit row with action ``misfire``;
a long run of missed slots shares one). This module makes those decisions;
fairq.timetable computes the slots and fairq.stores.sqlite.schedules holds the SQL.
It reads no clock: the time comes in from the facade.

DST rules for cron schedules: a local time that does not exist (the clocks
spring forward over it) fires once, at the first instant after the gap; a
local time that occurs twice (the clocks fall back) fires once, at its first
occurrence. Slot ids are UTC instants, so they stay unique.
"""

from __future__ import annotations

import builtins
import logging
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from typing import Any

from . import _validate as v
from . import cron as cronlib
from .stores.backend import Advance, NewEvent, NewSchedule, Snapshot, Store, WriteTxn
from .errors import Conflict, InvalidInput, UnknownSchedule
from .kernel.policy import to_ms
from .limits import MAX_BODY_CEILING
from .timetable import Timetable, zone
from .types import AuditEntry, Enqueued, Misfire, Schedule, UndecodableBody, slot_event_id, slot_text


__all__ = ["Schedules", "Timetable", "MAX_SLOTS_PER_TICK", "MAX_NAME_CHARS", "expand_due", "decide", "MISFIRE_ROWS"]

log = logging.getLogger("fairq")

#: The most instances of one schedule a tick makes (misfire="all", or slots
#: expanded ahead). A schedule further behind catches up over the following
#: ticks, each resuming from the stored position, so one tick stays one short
#: transaction however long the queue was down. Missed slots are not capped:
#: they are counted, not walked, and a long run of them is one audit row.
MAX_SLOTS_PER_TICK = 1000

#: A schedule's name is at most this long, so "{name}@{slot}" fits an event id.
MAX_NAME_CHARS = 200

# The longest slot an instance body can carry, to size-check a schedule's body.
_LAST_SLOT_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


# -- what a tick does ------------------------------------------------------------------


#: A run of more than this many consecutive missed slots is recorded as one
#: audit row (its first and last slot and their count), not a row per slot,
#: so a tick after any downtime writes a handful of rows.
MISFIRE_ROWS = 10


@dataclass
class Decision:
    """What one tick does with one schedule's due slots."""

    instances: list[int] = field(default_factory=list)  # slots that become events
    misfires: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)  # (slot, reason, detail)
    missed: int = 0  # slots the misfire rows stand for
    advance: Advance | None = None  # the schedule's new position; None: nothing was decided


def decide(schedule: Schedule, timetable: Timetable, now_ms: int, horizon_ms: int) -> Decision:
    """Decide the schedule's slots from its stored next slot up to horizon_ms.

    Slots later than now (expanded ahead) always become instances. Slots
    already due follow the misfire policy: all runs each of them; coalesce
    runs only the newest and records the others; skip runs those found at
    most `grace` late. Under coalesce, the newest also needs to be within
    grace when one is set. At most MAX_SLOTS_PER_TICK instances are made;
    missed slots are found and counted without walking them (Timetable), so
    any backlog of them is decided in this one tick.
    """
    decision = Decision()
    if schedule.next_slot is None or to_ms(schedule.next_slot) > horizon_ms:
        return decision
    first = to_ms(schedule.next_slot)
    grace_ms = None if schedule.grace is None else to_ms(schedule.grace)
    decided: int | None = None  # the newest slot decided so far
    resume: int | None = first  # the first slot not yet decided
    if first <= now_ms and schedule.misfire is Misfire.COALESCE:
        newest = timetable.latest(first, now_ms)
        if newest > first:
            _missed(decision, schedule, timetable, first, timetable.latest(first, newest - 1), now_ms,
                    f"a later slot ({slot_text(newest)}) was due")
        resume = newest
        if grace_ms is not None and now_ms - newest > grace_ms:
            _missed(decision, schedule, timetable, newest, newest, now_ms, "")
            decided, resume = newest, timetable.after(newest)
    elif first <= now_ms and schedule.misfire is Misfire.SKIP:
        assert grace_ms is not None
        if now_ms - first > grace_ms:
            last = timetable.latest(first, now_ms - grace_ms - 1)
            _missed(decision, schedule, timetable, first, last, now_ms, "")
            decided, resume = last, timetable.after(last)
    slot = resume
    while slot is not None and slot <= horizon_ms and len(decision.instances) < MAX_SLOTS_PER_TICK:
        decision.instances.append(slot)
        decided, slot = slot, timetable.after(slot)
    if decided is not None:
        decision.advance = Advance(schedule.name, decided, slot)
    return decision


def _missed(decision: Decision, schedule: Schedule, timetable: Timetable, first: int, last: int,
            now_ms: int, superseded: str) -> None:
    """Record the missed slots first..last: a row each, or one row for a long run.

    `superseded` says why under coalesce (a later slot was due); empty, the
    slots were found later than the grace allows.
    """
    policy = schedule.misfire.value
    count = timetable.count(first, last)
    decision.missed += count

    def why(late: float) -> str:
        return superseded or f"found {late:g} s late, over the grace of {schedule.grace:g} s"

    if count <= MISFIRE_ROWS:
        slot: int | None = first
        while slot is not None and slot <= last:
            late = (now_ms - slot) / 1000
            decision.misfires.append((slot, f"{policy}: {why(late)}", {
                "schedule": schedule.name, "slot": slot_text(slot), "misfire": policy, "late": late,
                "grace": schedule.grace,
            }))
            slot = timetable.after(slot)
        return
    late = (now_ms - first) / 1000
    reason = (f"{policy}: {count} slots from {slot_text(first)} to {slot_text(last)} missed; {superseded}"
              if superseded else
              f"{policy}: {count} slots from {slot_text(first)} to {slot_text(last)} found over the grace "
              f"of {schedule.grace:g} s late")
    decision.misfires.append((first, reason, {
        "schedule": schedule.name, "slot": slot_text(first), "last": slot_text(last), "count": count,
        "misfire": policy, "late": late, "grace": schedule.grace,
    }))


def instance_body(name: str, slot_ms: int, body: Any) -> dict[str, Any]:
    """What an instance carries: its schedule, its slot (text and seconds) and the schedule's body."""
    return {"schedule": name, "slot": slot_text(slot_ms), "due_at": slot_ms / 1000, "body": body}


def expand_due(tx: WriteTxn, now_ms: int, ahead_ms: int) -> list[Enqueued]:
    """Decide every due slot of every unpaused schedule, inside the caller's tick transaction.

    Instances, misfire records and the schedules' new positions commit
    together; an instance that already exists identically is left as it is.
    """
    store = tx.schedules()
    events: list[NewEvent] = []
    misfires: list[tuple[str, str, dict[str, Any]]] = []
    moves: list[Advance] = []
    for schedule in store.due(now_ms + ahead_ms):
        timetable = Timetable.of(to_ms(schedule.start), None if schedule.every is None else to_ms(schedule.every),
                                 schedule.cron, schedule.tz)
        decision = decide(schedule, timetable, now_ms, now_ms + ahead_ms)
        if isinstance(schedule.body, UndecodableBody):
            # A body this process cannot decode stops only its own schedule:
            # each due slot is a misfire saying why, and the schedule moves on.
            misfires.extend((slot_event_id(schedule.name, s), "undecodable_body", {"problem": schedule.body.problem})
                            for s in decision.instances)
            decision = replace(decision, instances=[])
        for slot_ms in decision.instances:
            body = v.body(instance_body(schedule.name, slot_ms, schedule.body), "body", max_bytes=MAX_BODY_CEILING)
            events.append(NewEvent(slot_event_id(schedule.name, slot_ms), schedule.flow, body, 0, at_ms=slot_ms))
        misfires.extend((slot_event_id(schedule.name, s), reason, detail) for s, reason, detail in decision.misfires)
        if decision.misfires:
            log.warning("schedule %s: %d slots misfired (%s)", schedule.name, decision.missed,
                        decision.misfires[0][1])
        if decision.advance is not None:
            moves.append(decision.advance)
    enqueued = _enqueue_untaken(tx, events, misfires, now_ms)
    if misfires:
        tx.append_misfires(misfires, now_ms)
    store.advance(moves)
    return enqueued


def _enqueue_untaken(
    tx: WriteTxn, events: list[NewEvent], misfires: list[tuple[str, str, dict[str, Any]]], now_ms: int
) -> list[Enqueued]:
    """Enqueue the instances; one whose id an unrelated event already holds is a misfire.

    enqueue_many raises Conflict before it writes anything, so dropping the
    taken id and trying again is safe.
    """
    while events:
        try:
            return tx.enqueue_many(events, now_ms)
        except Conflict as exc:
            events = [e for e in events if e.event_id != exc.event_id]
            misfires.append((exc.event_id, f"the instance id is taken by a different event ({exc})",
                             {"conflict": exc.field}))
            log.warning("schedule instance %s not created: %s", exc.event_id, exc)
    return []


# -- the facade --------------------------------------------------------------------


class Schedules:
    """The periodic schedules kept in a queue's file: ``q.schedules``.

    Each method is one transaction. add (with an explicit start), remove,
    pause and resume never read or move the queue's clock; q.tick() does
    the expanding.
    """

    def __init__(self, store: Store, requested: Callable[[float | None], tuple[int, bool]],
                 max_body_bytes: int) -> None:
        """store: the queue's store; requested(now): the (ms, explicit?) time a
        call asks for (Queue's clock); max_body_bytes: the queue's body limit."""
        self._store = store
        self._requested = requested
        self._max_body_bytes = max_body_bytes

    def add(
        self, name: str, *, every: float | None = None, cron: str | None = None, tz: str = "UTC",
        body: Any = None, flow: str | None = None, overlap: bool = False, start: float | None = None,
        misfire: Misfire | str = Misfire.COALESCE, grace: float | None = None,
    ) -> Schedule:
        """Create a schedule, or return it unchanged if it exists with this definition.

        every: seconds between slots, counted from `start`. cron: a 5-field
        expression (or @daily-style macro) read in time zone `tz`; its first
        slot is its first match at or after `start`. start defaults to the
        queue clock's current reading. body: JSON every instance carries.
        flow: the flow of the instances (default: the schedule's name, so
        runs never overlap); overlap=True makes each instance a flow of its
        own. misfire: "all", "coalesce" or "skip" (see Misfire); grace:
        seconds a due slot may be found late and still run (coalesce:
        optional; skip: required; all: refused).

        A name already taken with a different definition raises InvalidInput.
        """
        new = self._validated(name, every, cron, tz, body, flow, overlap, start, misfire, grace)
        timetable = Timetable.of(new.start_ms, new.every_ms, new.cron, new.tz)
        if timetable.first() is None:
            raise InvalidInput("cron", f"{new.cron!r} matches no date (like February 30)")
        # Only a defaulted start reads the clock.
        requested = self._requested(None) if start is None else None
        with self._store.transaction("schedule") as tx:
            store = tx.schedules()
            stored = store.get(new.name)
            if stored is not None:
                _refuse_redefinition(stored, new, explicit_start=start is not None)
                return stored
            if requested is not None:
                timetable = replace(timetable, start_ms=tx.now(*requested))
            first = timetable.first()
            if first is None:
                raise InvalidInput("cron", f"{new.cron!r} matches no date after its start")
            return store.insert(replace(new, start_ms=timetable.start_ms, next_slot_ms=first))

    def _validated(
        self, name: Any, every: Any, cron: Any, tz: Any, body: Any, flow: Any, overlap: Any, start: Any,
        misfire: Any, grace: Any,
    ) -> NewSchedule:
        name = v.identifier(name, "name")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidInput("name", f"must be at most {MAX_NAME_CHARS} characters, got {len(name)}")
        if (every is None) == (cron is None):
            raise InvalidInput("every", "give exactly one of every= (seconds) and cron= (an expression)")
        every_ms = None
        if every is not None:
            every_ms = to_ms(v.seconds(every, "every", positive=True))  # at least 1 ms
            if tz != "UTC":
                raise InvalidInput("tz", "applies to cron= schedules only; every= counts seconds from start")
        else:
            cron = cronlib.parse(cron)
        zone(tz)
        if not isinstance(overlap, bool):
            raise InvalidInput("overlap", f"must be True or False, not {type(overlap).__name__}")
        flow = v.optional_identifier(flow, "flow")
        if overlap and flow is not None:
            raise InvalidInput("overlap", "an overlapping schedule has no flow of its own; drop flow=")
        try:
            misfire = Misfire(misfire)
        except ValueError:
            raise InvalidInput("misfire", f"must be one of 'all', 'coalesce', 'skip', got {misfire!r}") from None
        grace_ms = None if grace is None else to_ms(v.seconds(grace, "grace"))
        if misfire is Misfire.ALL and grace_ms is not None:
            raise InvalidInput("grace", "does not apply to misfire='all', which runs every missed slot")
        if misfire is Misfire.SKIP and grace_ms is None:
            raise InvalidInput("grace", "is required with misfire='skip': how late a slot may be found and still run")
        start_ms = 0 if start is None else to_ms(v.seconds(start, "start"))
        canonical = v.body(body, "body", max_bytes=self._max_body_bytes)
        # The instance body wraps the schedule's body; the largest one must fit.
        v.body(instance_body(name, _LAST_SLOT_MS, body), "body", max_bytes=self._max_body_bytes)
        return NewSchedule(
            name=name, every_ms=every_ms, cron=None if cron is None else cron.expression, tz=tz,
            body=canonical, flow=None if overlap else (flow or name), start_ms=start_ms, misfire=misfire,
            grace_ms=grace_ms, next_slot_ms=start_ms,
        )

    def get(self, name: str) -> Schedule:
        """The schedule called `name`.

        Raises UnknownSchedule (an InvalidInput) if no schedule is called `name`.
        """
        name = v.identifier(name, "name")
        return _found(name, self._store.read(lambda tx: tx.schedules().get(name)))

    def list(self) -> list[Schedule]:
        """Every schedule, by name."""
        return self._store.read(lambda tx: tx.schedules().list())

    def misfires(self, name: str, *, limit: int = 20) -> builtins.list[AuditEntry]:
        """The misfire audit rows of the schedule's newest `limit` misfired slots, newest slot first.

        Raises UnknownSchedule if no schedule is called `name`.
        """
        name = v.identifier(name, "name")
        limit = v.count(limit, "limit", low=1, high=10_000)

        def read(tx: Snapshot) -> builtins.list[AuditEntry]:
            _found(name, tx.schedules().get(name))
            return tx.schedules().misfires(name, limit=limit)

        return self._store.read(read)

    def remove(self, name: str) -> None:
        """Delete a schedule. Its instances and misfire records stay.

        Raises UnknownSchedule if no schedule is called `name`; nothing is written.
        """
        name = v.identifier(name, "name")
        with self._store.transaction("schedule") as tx:
            removed = tx.schedules().delete(name)
        if not removed:
            raise _unknown(name)

    def pause(self, name: str) -> Schedule:
        """Hold a schedule's expansion; its slots wait for resume (see resume).

        Raises UnknownSchedule (an InvalidInput) if no schedule is called `name`.
        """
        return self._set_paused(name, True)

    def resume(self, name: str) -> Schedule:
        """Let ticks expand a paused schedule again, from its stored position: the
        slots that came due meanwhile are reconciled by its misfire policy.
        Raises UnknownSchedule if no schedule is called `name`."""
        return self._set_paused(name, False)

    def _set_paused(self, name: Any, paused: bool) -> Schedule:
        name = v.identifier(name, "name")
        with self._store.transaction("schedule") as tx:
            schedule = tx.schedules().set_paused(name, paused)
        return _found(name, schedule)


def _found(name: str, schedule: Schedule | None) -> Schedule:
    """The schedule looked up by `name`; UnknownSchedule if there was none."""
    if schedule is None:
        raise _unknown(name)
    return schedule


def _unknown(name: str) -> UnknownSchedule:
    """The one way Schedules says that no schedule is called `name`."""
    return UnknownSchedule("name", f"no schedule is called {name!r}")


def _refuse_redefinition(stored: Schedule, new: NewSchedule, *, explicit_start: bool) -> None:
    """An add of an existing name must repeat its definition (start only if given)."""
    asked = {
        "every": new.every_ms, "cron": new.cron, "tz": new.tz, "body": new.body, "flow": new.flow,
        "misfire": new.misfire, "grace": new.grace_ms,
    }
    have = {
        "every": None if stored.every is None else to_ms(stored.every), "cron": stored.cron, "tz": stored.tz,
        "body": v.body(stored.body, "body", max_bytes=MAX_BODY_CEILING), "flow": stored.flow,
        "misfire": stored.misfire, "grace": None if stored.grace is None else to_ms(stored.grace),
    }
    if explicit_start:
        asked["start"], have["start"] = new.start_ms, to_ms(stored.start)
    for key in asked:
        if asked[key] != have[key]:
            raise InvalidInput("name", f"schedule {stored.name!r} already exists with a different {key}; "
                                       "remove it first to redefine it")

