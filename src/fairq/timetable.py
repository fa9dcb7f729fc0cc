"""The slots of one schedule: pure arithmetic on UTC milliseconds, no clock, no SQL.

A timetable lists a schedule's slots in order (``start + k * every``, or the
matches of a cron expression read in a time zone, by the DST rules in
fairq.schedules), finds the newest slot at or before an instant and counts
the slots between two of them, without walking every slot in between: a
tick after a year's downtime costs the same as one after a minute's.
"""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo
from dataclasses import dataclass
from typing import Any

from . import cron as cronlib
from .errors import InvalidInput

__all__ = ["Timetable", "zone", "wall_to_utc_ms"]


def zone(name: Any) -> zoneinfo.ZoneInfo:
    """The IANA time zone `name`, or InvalidInput("tz", ...)."""
    if not isinstance(name, str) or not name:
        raise InvalidInput("tz", f"must be an IANA time zone name like 'Europe/Berlin', got {name!r}")
    return _zone(name)


@functools.lru_cache(maxsize=256)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput("tz", f"{name!r} is not a known IANA time zone") from None


def wall_to_utc_ms(wall: dt.datetime, tz: zoneinfo.ZoneInfo) -> int:
    """The UTC instant (ms) a naive local wall time fires at, by the DST rules.

    A time that occurs twice fires at its first occurrence (fold=0 is the
    earlier one); a time inside a spring-forward gap fires at the instant
    the gap ends.
    """
    first = int(wall.replace(tzinfo=tz, fold=0).timestamp())
    if dt.datetime.fromtimestamp(first, tz).replace(tzinfo=None, fold=0) == wall:
        return first * 1000
    # In a gap the two folds read the wall time with the offsets on either
    # side of the transition, so the transition lies between them.
    other = int(wall.replace(tzinfo=tz, fold=1).timestamp())
    before, after = min(first, other), max(first, other)
    offset_before = dt.datetime.fromtimestamp(before, tz).utcoffset()
    while after - before > 1:
        mid = (before + after) // 2
        if dt.datetime.fromtimestamp(mid, tz).utcoffset() == offset_before:
            before = mid
        else:
            after = mid
    return after * 1000


@dataclass(frozen=True)
class Timetable:
    """The slots of one schedule, in order: pure arithmetic, no clock."""

    start_ms: int
    every_ms: int | None = None
    cron: cronlib.Cron | None = None
    tz: zoneinfo.ZoneInfo | None = None

    @classmethod
    def of(cls, start_ms: int, every_ms: int | None, cron: str | None, tz: str) -> Timetable:
        """The timetable of a schedule definition (exactly one of every_ms and cron)."""
        if every_ms is not None:
            return cls(start_ms, every_ms=every_ms)
        assert cron is not None
        return cls(start_ms, cron=_parse_cron(cron), tz=zone(tz))

    def first(self) -> int | None:
        """The first slot: start itself (every=), or the first match at or after start (cron=)."""
        return self.start_ms if self.every_ms is not None else self.after(self.start_ms - 1)

    def after(self, slot_ms: int) -> int | None:
        """The first slot later than slot_ms; None if the cron never matches again."""
        if self.every_ms is not None:
            return slot_ms + self.every_ms
        assert self.cron is not None and self.tz is not None
        # Matches are looked for in local wall time from the minute holding
        # slot_ms; a wall time that maps to slot_ms or earlier (the rest of a
        # gap, the repeat of a fallen-back hour) is passed over.
        wall = dt.datetime.fromtimestamp(slot_ms // 1000, self.tz).replace(tzinfo=None, fold=0)
        candidate = wall.replace(second=0, microsecond=0)
        while True:
            match = self.cron.next_match(candidate)
            if match is None:
                return None
            fire_ms = wall_to_utc_ms(match, self.tz)
            if fire_ms > slot_ms:
                return fire_ms
            candidate = match + dt.timedelta(minutes=1)

    def latest(self, since_ms: int, limit_ms: int) -> int:
        """The newest slot at or before limit_ms, given a slot since_ms <= limit_ms.

        every=: arithmetic. cron=: a binary search for the last instant whose
        next slot is still within the limit, about 40 cron lookups whatever
        the distance.
        """
        if self.every_ms is not None:
            return since_ms + (limit_ms - since_ms) // self.every_ms * self.every_ms
        low, high = since_ms, limit_ms + 1  # the first slot from `low` is within the limit; from `high` not
        while high - low > 1:
            mid = (low + high) // 2
            found = self.after(mid - 1)
            if found is not None and found <= limit_ms:
                low = mid
            else:
                high = mid
        found = self.after(low - 1)
        assert found is not None and found <= limit_ms
        return found

    def count(self, first_ms: int, last_ms: int) -> int:
        """How many slots lie from slot first_ms to slot last_ms, both included.

        every=: arithmetic. cron=: whole local days in between count as
        (matching day) x hours x minutes; the first and last days, and days
        whose UTC offset changes (DST), are walked slot by slot. Exact.
        """
        if last_ms < first_ms:
            return 0
        if self.every_ms is not None:
            return (last_ms - first_ms) // self.every_ms + 1
        assert self.cron is not None and self.tz is not None
        first_day = self._day(first_ms) + dt.timedelta(days=1)
        last_day = self._day(last_ms)
        if first_day > last_day:
            return self._walk(first_ms, last_ms)
        n = self._walk(first_ms, self._midnight(first_day) - 1)
        per_day = len(self.cron.hours) * len(self.cron.minutes)
        day, start = first_day, None
        while day < last_day:
            following = day + dt.timedelta(days=1)
            end = None
            if day.month in self.cron.months and self.cron.matches_day(day):
                start = self._midnight(day) if start is None else start
                end = self._midnight(following)
                if self._offset(start) == self._offset(end):
                    n += per_day
                else:
                    n += self._walk(start, end - 1)
            day, start = following, end
        return n + self._walk(self._midnight(last_day), last_ms)

    def _walk(self, from_ms: int, to_ms: int) -> int:
        """Slots in [from_ms, to_ms], one by one (a day at most)."""
        n = 0
        slot = self.after(from_ms - 1)
        while slot is not None and slot <= to_ms:
            n += 1
            slot = self.after(slot)
        return n

    def _day(self, at_ms: int) -> dt.date:
        assert self.tz is not None
        return dt.datetime.fromtimestamp(at_ms // 1000, self.tz).date()

    def _midnight(self, day: dt.date) -> int:
        assert self.tz is not None
        return wall_to_utc_ms(dt.datetime.combine(day, dt.time()), self.tz)

    def _offset(self, at_ms: int) -> dt.timedelta | None:
        return dt.datetime.fromtimestamp(at_ms // 1000, self.tz).utcoffset()


@functools.lru_cache(maxsize=1024)
def _parse_cron(expression: str) -> cronlib.Cron:
    return cronlib.parse(expression)
