"""All SQL of schedules, run inside a queue transaction.

ScheduleTxn borrows the connection of an open queue transaction, so a tick's
instances, misfires and schedule positions commit together. It never
commits, never reads a clock and makes no decision: fairq.schedules decides
which slots exist and what becomes of them.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence
from typing import Protocol

from ..backend import Advance, NewSchedule
from ...kernel.rows import audit_entry, schedule as _schedule, schedule_params
from ...types import AuditEntry, Schedule


class _Bound(Protocol):
    """An open queue transaction or read snapshot: what ScheduleTxn runs on."""

    connection: sqlite3.Connection


# The columns a Schedule is made of, in _schedule's order.
_COLUMNS = ("name, every_ms, cron, tz, body, flow, start_ms, misfire, grace_ms, paused, "
            "last_slot_ms, next_slot_ms ")
_SELECT = "SELECT " + _COLUMNS + "FROM schedule "


class ScheduleTxn:
    """The schedule statements, bound to an open queue transaction or read snapshot."""

    def __init__(self, tx: _Bound) -> None:
        self.connection = tx.connection

    def get(self, name: str) -> Schedule | None:
        # By the name, the schedule's primary key.
        row = self.connection.execute(_SELECT + "WHERE name = :name", {"name": name}).fetchone()
        return None if row is None else _schedule(row)

    def misfires(self, name: str, *, limit: int) -> builtins.list[AuditEntry]:
        # A slot's instance id is "{name}@{slot}" (ISO time, which sorts as
        # time): the schedule's rows are a range of the audit_event index
        # ("@" + 1 is "A"), walked backwards from the newest slot with no
        # sort, stopping at `limit` misfires; the detail names the schedule,
        # which a name holding "@" could share.
        rows = self.connection.execute(
            "SELECT event_id, action, reason, actor, generation, at_ms, detail, id FROM audit "
            "WHERE event_id >= :low AND event_id < :high AND action = 'misfire' "
            "AND json_extract(detail, '$.schedule') = :name ORDER BY event_id DESC, id DESC LIMIT :limit",
            {"low": name + "@", "high": name + "A", "name": name, "limit": limit})
        return [audit_entry(r) for r in rows]

    def list(self) -> list[Schedule]:
        # Every schedule, in name order (the primary key's order).
        return [_schedule(row) for row in self.connection.execute(_SELECT + "ORDER BY name")]

    def insert(self, new: NewSchedule) -> Schedule:
        # A name is one schedule; the caller has checked it is free.
        row = self.connection.execute(
            "INSERT INTO schedule (name, every_ms, cron, tz, body, flow, start_ms, misfire, grace_ms, "
            "next_slot_ms) VALUES (:name, :every_ms, :cron, :tz, :body, :flow, :start_ms, :misfire, "
            ":grace_ms, :next_slot_ms) RETURNING " + _COLUMNS,
            schedule_params(new),
        ).fetchone()
        return _schedule(row)

    def delete(self, name: str) -> bool:
        # Removing a schedule leaves its instances and misfire records alone.
        cursor = self.connection.execute("DELETE FROM schedule WHERE name = :name", {"name": name})
        return cursor.rowcount == 1

    def set_paused(self, name: str, paused: bool) -> Schedule | None:
        # Pausing only holds expansion: the stored position stays where it is.
        row = self.connection.execute(
            "UPDATE schedule SET paused = :paused WHERE name = :name RETURNING " + _COLUMNS,
            {"name": name, "paused": int(paused)},
        ).fetchone()
        return None if row is None else _schedule(row)

    def due(self, horizon_ms: int) -> builtins.list[Schedule]:  # `list` here is the method above
        # Through the schedule_due index: only unpaused schedules whose next
        # slot has come are read, however many schedules wait.
        return [_schedule(row) for row in self.connection.execute(
            _SELECT + "INDEXED BY schedule_due WHERE paused = 0 AND next_slot_ms <= :horizon_ms "
            "ORDER BY next_slot_ms",
            {"horizon_ms": horizon_ms},
        )]

    def advance(self, moves: Sequence[Advance]) -> None:
        # Every slot up to last_slot_ms has been decided (an instance or a
        # misfire, written in this same transaction); the next tick resumes
        # at next_slot_ms.
        self.connection.executemany(
            "UPDATE schedule SET last_slot_ms = :last_slot_ms, next_slot_ms = :next_slot_ms "
            "WHERE name = :name",
            [{"name": m.name, "last_slot_ms": m.last_slot_ms, "next_slot_ms": m.next_slot_ms} for m in moves],
        )
