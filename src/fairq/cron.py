"""Five-field cron expressions: parse them, and find the next matching wall time.

Classic cron: ``minute hour day-of-month month day-of-week`` with lists
(``1,15``), ranges (``1-5``), steps (``*/15``, ``0-30/10``, ``5/20`` meaning
``5-59/20``), month and weekday names (``jan``, ``mon-fri``), Sunday as 0 or
7, and the macros ``@hourly @daily @midnight @weekly @monthly @yearly
@annually``. When both day fields are restricted (neither starts with
``*``), a day matches if either matches, as crontab(5) says; otherwise both
must match.

Pure: no clock, no time zone, no database. Matching works on naive local
wall times; fairq.schedules turns them into UTC instants and applies the DST
rules. Every malformed expression raises InvalidInput whose field names the
cron field at fault (``cron.minute``, ``cron.day_of_week``, ...).
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from dataclasses import dataclass

from .errors import InvalidInput

__all__ = ["Cron", "parse", "FIELDS", "MACROS"]

#: (name, lowest, highest) of the five fields, in order.
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day_of_month", 1, 31),
    ("month", 1, 12),
    ("day_of_week", 0, 7),
)

MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_NAMES = {
    "month": {name: i + 1 for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))},
    "day_of_week": {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))},
}

_ITEM = re.compile(r"(?P<base>\*|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/(?P<step>[0-9]+))?\Z")
_MAX_DIGITS = 4

#: How far ahead next_match looks before it decides an expression never matches
#: again. February 29th, the rarest date, can be 8 years apart (2096 -> 2104).
HORIZON_YEARS = 10


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression: the sorted values each field allows."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0 = Sunday .. 6 = Saturday (7 is folded into 0)
    day_of_month_star: bool  # the field starts with "*": not restricted for the OR rule
    day_of_week_star: bool

    def matches_day(self, day: dt.date) -> bool:
        """Do the day-of-month and day-of-week fields (with the OR rule) allow this date?"""
        in_days = day.day in self.days
        in_weekdays = (day.weekday() + 1) % 7 in self.weekdays
        if self.day_of_month_star or self.day_of_week_star:
            return in_days and in_weekdays
        return in_days or in_weekdays

    def next_match(self, start: dt.datetime) -> dt.datetime | None:
        """The first whole-minute wall time >= start that matches, or None if
        none does within HORIZON_YEARS (the expression names no real date)."""
        t = start.replace(tzinfo=None, fold=0)
        if t.second or t.microsecond:
            t = t.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        last_year = min(start.year + HORIZON_YEARS, dt.MAXYEAR - 1)
        while t.year <= last_year:
            if t.month not in self.months:
                t = _first_day_of_next_month(t, self.months)
            elif not self.matches_day(t.date()):
                t = dt.datetime.combine(t.date() + dt.timedelta(days=1), dt.time())
            elif t.hour not in self.hours:
                i = bisect.bisect_right(self.hours, t.hour)
                if i < len(self.hours):
                    t = t.replace(hour=self.hours[i], minute=0)
                else:
                    t = dt.datetime.combine(t.date() + dt.timedelta(days=1), dt.time())
            elif t.minute not in self.minutes:
                i = bisect.bisect_right(self.minutes, t.minute)
                if i < len(self.minutes):
                    t = t.replace(minute=self.minutes[i])
                else:
                    t = t.replace(minute=0) + dt.timedelta(hours=1)
            else:
                return t
        return None


def _first_day_of_next_month(t: dt.datetime, months: tuple[int, ...]) -> dt.datetime:
    i = bisect.bisect_right(months, t.month)
    if i < len(months):
        return dt.datetime(t.year, months[i], 1)
    return dt.datetime(t.year + 1, months[0], 1)


def parse(expression: object, field: str = "cron") -> Cron:
    """Parse a 5-field expression or macro; InvalidInput names the field at fault."""
    if not isinstance(expression, str):
        raise InvalidInput(field, f"must be a str, not {type(expression).__name__}")
    text = expression.strip()
    if not text:
        raise InvalidInput(field, "must not be empty")
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            problem = "is not periodic" if text.lower() == "@reboot" else "is not a known macro"
            raise InvalidInput(field, f"{text!r} {problem}; use one of {', '.join(MACROS)}")
        parts = macro.split()
    else:
        parts = text.split()
    if len(parts) != len(FIELDS):
        raise InvalidInput(
            field,
            f"needs 5 fields (minute hour day-of-month month day-of-week), got {len(parts)} in {text!r}",
        )
    values = [_parse_field(part, name, low, high, f"{field}.{name}")
              for part, (name, low, high) in zip(parts, FIELDS)]
    return Cron(
        expression=text,
        minutes=tuple(sorted(values[0])),
        hours=tuple(sorted(values[1])),
        days=frozenset(values[2]),
        months=tuple(sorted(values[3])),
        weekdays=frozenset(v % 7 for v in values[4]),
        day_of_month_star=parts[2].startswith("*"),
        day_of_week_star=parts[4].startswith("*"),
    )


def _parse_field(text: str, name: str, low: int, high: int, field: str) -> set[int]:
    allowed: set[int] = set()
    for item in text.split(","):
        if not item:
            raise InvalidInput(field, f"has an empty list item in {text!r}")
        match = _ITEM.match(item)
        if match is None:
            raise InvalidInput(field, f"{item!r} is not a value, range or step (like 5, 1-5, */15, 0-30/10)")
        base, step_text = match.group("base"), match.group("step")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, b = base.split("-")
            first, last = _value(a, name, low, high, field), _value(b, name, low, high, field)
            if first > last:
                raise InvalidInput(field, f"range {base!r} runs backwards")
        else:
            first = _value(base, name, low, high, field)
            last = high if step_text is not None else first
        step = 1
        if step_text is not None:
            step = _number(step_text, field, "step")
            if not 1 <= step <= high - low:
                raise InvalidInput(field, f"step {step} in {item!r} must be between 1 and {high - low}")
        allowed.update(range(first, last + 1, step))
    return allowed


def _value(text: str, name: str, low: int, high: int, field: str) -> int:
    if text.isascii() and text.isdigit():
        value = _number(text, field, "value")
        if not low <= value <= high:
            raise InvalidInput(field, f"{value} is out of range {low}-{high}")
        return value
    names = _NAMES.get(name)
    if names is None:
        raise InvalidInput(field, f"{text!r} is not a number")
    named = names.get(text.lower())
    if named is None:
        raise InvalidInput(field, f"{text!r} is not a number or one of {', '.join(names)}")
    return named


def _number(text: str, field: str, what: str) -> int:
    if len(text) > _MAX_DIGITS:
        raise InvalidInput(field, f"{what} {text[:_MAX_DIGITS + 2]}... has too many digits")
    return int(text)
