"""All SQL of schedules on PostgreSQL, run inside a queue transaction or snapshot.

PgSchedules borrows the connection of an open queue transaction, so a tick's
instances, misfires and schedule positions commit together. It never
commits, never reads a clock and makes no decision: fairq.schedules decides
which slots exist and what becomes of them. A tick locks the due schedules
(FOR UPDATE): concurrent tickers take turns on a schedule, and the second
resumes from the first one's position.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from ..backend import Advance, NewSchedule
from ...kernel.rows import audit_entry, schedule, schedule_params
from ...types import AuditEntry, Schedule

_COLUMNS = ("name, every_ms, cron, tz, body, flow, start_ms, misfire, grace_ms, paused, "
            "last_slot_ms, next_slot_ms ")
_SELECT = "SELECT " + _COLUMNS + "FROM schedule "


class PgSchedules:
    """The schedule statements, bound to an open connection."""

    def __init__(self, conn: Any) -> None:
        self.connection = conn

    def get(self, name: str) -> Schedule | None:
        # By the name's unique key.
        row = self.connection.execute(_SELECT + "WHERE name = %(name)s", {"name": name}).fetchone()
        return None if row is None else schedule(row)

    def misfires(self, name: str, *, limit: int) -> builtins.list[AuditEntry]:
        # Through audit_misfire: the schedule's misfire rows by instance id
        # ("{name}@{slot}", time order in byte order), walked backwards from
        # the newest slot with no sort, stopping at `limit`.
        rows = self.connection.execute(
            "SELECT event_id, action, reason, actor, generation, at_ms, detail, id FROM audit "
            "WHERE action = 'misfire' AND (detail::jsonb ->> 'schedule') = %(name)s "
            "ORDER BY (event_id COLLATE \"C\") DESC, id DESC LIMIT %(limit)s",
            {"name": name, "limit": limit})
        return [audit_entry(r) for r in rows]

    def list(self) -> list[Schedule]:
        # Every schedule, in name order.
        return [schedule(row) for row in self.connection.execute(_SELECT + "ORDER BY name")]

    def insert(self, new: NewSchedule) -> Schedule:
        # A name is one schedule; the caller has checked it is free (the unique key holds it).
        row = self.connection.execute(
            "INSERT INTO schedule (name, every_ms, cron, tz, body, flow, start_ms, misfire, grace_ms, "
            "next_slot_ms) VALUES (%(name)s, %(every_ms)s, %(cron)s, %(tz)s, %(body)s, %(flow)s, %(start_ms)s, "
            "%(misfire)s, %(grace_ms)s, %(next_slot_ms)s) RETURNING " + _COLUMNS,
            schedule_params(new),
        ).fetchone()
        return schedule(row)

    def delete(self, name: str) -> bool:
        # Removing a schedule leaves its instances and misfire records alone.
        return int(self.connection.execute("DELETE FROM schedule WHERE name = %(name)s",
                                           {"name": name}).rowcount) == 1

    def set_paused(self, name: str, paused: bool) -> Schedule | None:
        # Pausing only holds expansion: the stored position stays where it is.
        row = self.connection.execute(
            "UPDATE schedule SET paused = %(paused)s WHERE name = %(name)s RETURNING " + _COLUMNS,
            {"name": name, "paused": paused},
        ).fetchone()
        return None if row is None else schedule(row)

    def due(self, horizon_ms: int) -> builtins.list[Schedule]:  # `list` here is the method above
        # Through schedule_due: only unpaused schedules whose next slot has
        # come, locked so that two tickers never decide one slot twice.
        return [schedule(row) for row in self.connection.execute(
            _SELECT + "WHERE NOT paused AND next_slot_ms <= %(horizon_ms)s ORDER BY next_slot_ms, name FOR UPDATE",
            {"horizon_ms": horizon_ms},
        )]

    def advance(self, moves: Sequence[Advance]) -> None:
        if not moves:
            return
        # Every slot up to last_slot_ms has been decided in this transaction;
        # the next tick resumes at next_slot_ms.
        self.connection.execute(
            "UPDATE schedule AS s SET last_slot_ms = m.last, next_slot_ms = m.next "
            "FROM unnest(%(name)s::text[], %(last)s::bigint[], %(next)s::bigint[]) AS m(name, last, next) "
            "WHERE s.name = m.name",
            {"name": [m.name for m in moves], "last": [m.last_slot_ms for m in moves],
             "next": [m.next_slot_ms for m in moves]},
        )
