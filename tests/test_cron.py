"""The 5-field cron parser: what it accepts, what it matches, and every refusal."""

from __future__ import annotations

import datetime as dt

import pytest

import fairq
from fairq import cron


def matches(expression: str, start: str, n: int) -> list[str]:
    """The first n wall times at or after start that the expression matches."""
    parsed = cron.parse(expression)
    out = []
    t = dt.datetime.fromisoformat(start)
    for _ in range(n):
        t = parsed.next_match(t)
        out.append(t.isoformat(timespec="minutes"))
        t += dt.timedelta(minutes=1)
    return out


def test_a_plain_expression_lists_the_allowed_values_of_each_field() -> None:
    c = cron.parse("0,30 9-17 * * mon-fri")
    assert c.minutes == (0, 30)
    assert c.hours == tuple(range(9, 18))
    assert c.days == frozenset(range(1, 32))
    assert c.months == tuple(range(1, 13))
    assert c.weekdays == frozenset({1, 2, 3, 4, 5})


@pytest.mark.parametrize("expression, field, values", [
    ("*/15 * * * *", "minutes", (0, 15, 30, 45)),
    ("0-30/10 * * * *", "minutes", (0, 10, 20, 30)),
    ("5/20 * * * *", "minutes", (5, 25, 45)),
    ("1,2,5-7 * * * *", "minutes", (1, 2, 5, 6, 7)),
    ("0 */6 * * *", "hours", (0, 6, 12, 18)),
    ("0 0 1 jan,JUL,dec *", "months", (1, 7, 12)),
    ("0 0 1 feb-apr *", "months", (2, 3, 4)),
    ("0 0 * * 7", "weekdays", frozenset({0})),
    ("0 0 * * 0,7", "weekdays", frozenset({0})),
    ("0 0 * * Mon-Wed/2", "weekdays", frozenset({1, 3})),
])
def test_lists_ranges_steps_and_names_expand_to_their_values(expression, field, values) -> None:
    assert getattr(cron.parse(expression), field) == values


@pytest.mark.parametrize("macro, same_as", [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *"),
])
def test_macros_are_their_five_field_equivalents(macro, same_as) -> None:
    a, b = cron.parse(macro), cron.parse(same_as)
    assert (a.minutes, a.hours, a.days, a.months, a.weekdays) == (b.minutes, b.hours, b.days, b.months, b.weekdays)
    assert a.expression == macro


def test_both_day_fields_restricted_means_either_day_matches() -> None:
    # The 13th of a month OR any Friday (crontab(5)).
    assert matches("0 0 13 * fri", "2026-03-01", 4) == [
        "2026-03-06T00:00", "2026-03-13T00:00", "2026-03-20T00:00", "2026-03-27T00:00"]
    assert matches("0 0 13 * fri", "2026-04-01", 2) == ["2026-04-03T00:00", "2026-04-10T00:00"]


def test_one_day_field_starred_means_only_the_other_decides() -> None:
    assert matches("0 0 13 * *", "2026-03-01", 2) == ["2026-03-13T00:00", "2026-04-13T00:00"]
    assert matches("0 0 * * fri", "2026-03-01", 2) == ["2026-03-06T00:00", "2026-03-13T00:00"]


def test_a_stepped_star_counts_as_unrestricted_so_both_day_fields_must_match() -> None:
    # "*/2" starts with "*": crontab(5) treats the field as unrestricted, and
    # the fields are AND-ed: odd days that are also Mondays.
    assert matches("0 0 */2 * mon", "2026-03-01", 3) == [
        "2026-03-09T00:00", "2026-03-23T00:00", "2026-04-13T00:00"]


def test_next_match_rounds_up_to_a_whole_minute_and_crosses_years() -> None:
    parsed = cron.parse("0 0 1 1 *")
    assert parsed.next_match(dt.datetime(2026, 1, 1, 0, 0, 1)) == dt.datetime(2027, 1, 1)
    assert parsed.next_match(dt.datetime(2026, 1, 1)) == dt.datetime(2026, 1, 1)


def test_february_29th_is_found_across_a_century_year_without_one() -> None:
    assert cron.parse("0 0 29 2 *").next_match(dt.datetime(2097, 1, 1)) == dt.datetime(2104, 2, 29)


def test_an_expression_naming_no_real_date_never_matches() -> None:
    assert cron.parse("0 0 30 2 *").next_match(dt.datetime(2026, 1, 1)) is None
    assert cron.parse("0 0 31 4,6,9,11 *").next_match(dt.datetime(2026, 1, 1)) is None


def test_the_last_day_candidates_skip_short_months() -> None:
    assert matches("0 12 31 * *", "2026-01-31T13:00", 3) == [
        "2026-03-31T12:00", "2026-05-31T12:00", "2026-07-31T12:00"]


# Every malformed expression is refused with InvalidInput naming the field at fault.
MALFORMED = [
    ("", "cron", "empty"),
    ("   ", "cron", "empty"),
    ("* * * *", "cron", "5 fields"),
    ("* * * * * *", "cron", "5 fields"),
    ("0 0 * * * 2026", "cron", "5 fields"),
    ("@reboot", "cron", "not periodic"),
    ("@fortnightly", "cron", "not a known macro"),
    ("60 * * * *", "cron.minute", "out of range 0-59"),
    ("-1 * * * *", "cron.minute", "not a value"),
    ("* 24 * * *", "cron.hour", "out of range 0-23"),
    ("* * 0 * *", "cron.day_of_month", "out of range 1-31"),
    ("* * 32 * *", "cron.day_of_month", "out of range 1-31"),
    ("* * * 13 *", "cron.month", "out of range 1-12"),
    ("* * * 0 *", "cron.month", "out of range 1-12"),
    ("* * * * 8", "cron.day_of_week", "out of range 0-7"),
    ("*/0 * * * *", "cron.minute", "step 0"),
    ("*/60 * * * *", "cron.minute", "step 60"),
    ("30-10 * * * *", "cron.minute", "runs backwards"),
    ("* * * * fri-mon", "cron.day_of_week", "runs backwards"),
    ("1,,2 * * * *", "cron.minute", "empty list item"),
    ("1, * * * *", "cron.minute", "empty list item"),
    ("* * * jan-foo *", "cron.month", "'foo' is not a number or one of"),
    ("* * * * funday", "cron.day_of_week", "not a number or one of"),
    ("mon * * * *", "cron.minute", "'mon' is not a number"),
    ("* * * jan *x", "cron.day_of_week", "not a value"),
    ("? * * * *", "cron.minute", "not a value"),
    ("* * L * *", "cron.day_of_month", "not a number"),
    ("* * * * 5#2", "cron.day_of_week", "not a value"),
    ("1-2-3 * * * *", "cron.minute", "not a value"),
    ("*/ * * * *", "cron.minute", "not a value"),
    ("/5 * * * *", "cron.minute", "not a value"),
    ("00005 * * * *", "cron.minute", "too many digits"),
    ("*/99999999999999999999 * * * *", "cron.minute", "too many digits"),
    ("\u0663 * * * *", "cron.minute", "not a value"),  # an Arabic-Indic digit three
    ("1.5 * * * *", "cron.minute", "not a value"),
]


@pytest.mark.parametrize("expression, field, problem", MALFORMED)
def test_a_malformed_expression_is_refused_naming_the_field(expression, field, problem) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        cron.parse(expression)
    assert info.value.field == field
    assert problem in info.value.problem


def test_there_are_at_least_twenty_refusal_cases() -> None:
    assert len(MALFORMED) >= 20


@pytest.mark.parametrize("value", [None, 5, ["* * * * *"], b"* * * * *"])
def test_a_non_string_expression_is_refused(value) -> None:
    with pytest.raises(fairq.InvalidInput, match="must be a str"):
        cron.parse(value)
