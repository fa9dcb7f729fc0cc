"""Catching up after a long gap: one tick, a handful of audit rows, exact counts.

A run of missed slots longer than fairq.schedules.MISFIRE_ROWS is one audit row (first slot,
last slot, count); the slots are found and counted without walking them.
"""

from __future__ import annotations

import datetime as dt

import pytest

import fairq
from fairq.timetable import Timetable

YEAR = 365 * 86_400
DAY = 86_400


def misfire_rows(q: fairq.Queue) -> list[fairq.AuditEntry]:
    return [a for a in q.audit() if a.action == "misfire"]


def audit_rows(q: fairq.Queue) -> int:
    return len(q.audit())


def test_coalesce_after_a_year_catches_up_in_one_tick_with_one_row_and_the_exact_count(q) -> None:
    q.schedules.add("beat", every=10, start=0)
    done = q.tick(now=YEAR + 5)
    assert [e.event_id for e in done] == ["beat@1971-01-01T00:00:00Z"]
    rows = misfire_rows(q)
    assert len(rows) == 1 and audit_rows(q) <= 3
    assert rows[0].event_id == "beat@1970-01-01T00:00:00Z"
    assert rows[0].detail["count"] == YEAR // 10  # slots 0, 10, ..., YEAR - 10
    assert rows[0].detail["last"] == "1970-12-31T23:59:50Z"
    assert "3153600 slots" in rows[0].reason
    assert q.schedules.get("beat").next_slot == YEAR + 10
    assert q.tick(now=YEAR + 5) == []
    assert len(misfire_rows(q)) == 1


def test_coalesce_with_grace_after_a_year_records_the_run_and_the_late_newest(q) -> None:
    q.schedules.add("beat", every=10, start=0, grace=2)
    assert q.tick(now=YEAR + 5) == []
    rows = misfire_rows(q)
    assert [r.detail.get("count", 1) for r in rows] == [YEAR // 10, 1]
    assert rows[1].event_id == "beat@1971-01-01T00:00:00Z"


def test_skip_after_a_year_runs_the_slots_within_grace_and_records_one_row(q) -> None:
    q.schedules.add("beat", every=10, start=0, misfire="skip", grace=25)
    done = q.tick(now=YEAR)
    assert [e.event_id for e in done] == [
        "beat@1970-12-31T23:59:40Z", "beat@1970-12-31T23:59:50Z", "beat@1971-01-01T00:00:00Z"]
    rows = misfire_rows(q)
    assert len(rows) == 1
    assert rows[0].detail["count"] == YEAR // 10 - 2  # 0 .. YEAR - 30
    assert "over the grace of 25 s" in rows[0].reason


def test_all_after_a_long_gap_still_makes_at_most_the_cap_per_tick_and_records_nothing(q) -> None:
    q.schedules.add("beat", every=10, start=0, misfire="all")
    assert len(q.tick(now=DAY)) == fairq.schedules.MAX_SLOTS_PER_TICK
    assert misfire_rows(q) == []


def test_an_every_minute_cron_a_year_behind_is_one_tick_with_an_exact_count(q) -> None:
    q.schedules.add("minutely", cron="* * * * *", tz="Europe/Berlin", start=0)
    start = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    now = start + YEAR + 30
    done = q.tick(now=now)
    assert [e.event_id for e in done] == ["minutely@1971-01-01T00:00:00Z"]
    rows = misfire_rows(q)
    assert len(rows) == 1
    # Every minute of 1970 (Berlin kept no summer time that year), the newest excepted.
    assert rows[0].detail["count"] == YEAR // 60


@pytest.mark.parametrize("expression", ["*/5 * * * *", "30 2 * * *", "0 9-17 * * 1-5", "* 2 * * *"])
def test_counting_and_the_newest_slot_agree_with_walking_across_dst(expression) -> None:
    tz = "Europe/Berlin"
    table = Timetable.of(0, None, expression, tz)
    begin = int(dt.datetime(2026, 3, 20, 7, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    end = int(dt.datetime(2026, 4, 3, 13, 17, tzinfo=dt.timezone.utc).timestamp() * 1000)
    walked = []
    slot = table.after(begin - 1)
    while slot is not None and slot <= end:
        walked.append(slot)
        slot = table.after(slot)
    assert table.count(walked[0], walked[-1]) == len(walked)
    assert table.count(walked[3], walked[-4]) == len(walked) - 6
    assert table.latest(walked[0], end) == walked[-1]
    assert table.latest(walked[0], walked[10] - 1) == walked[9]


def test_counting_a_year_of_a_cron_across_both_dst_changes_is_exact() -> None:
    table = Timetable.of(0, None, "*/15 * * * *", "Europe/Berlin")
    first = int(dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
    last = table.latest(first, first + YEAR * 1000 - 1)
    # Every quarter hour of 365 days, less the four of the repeated autumn hour.
    assert table.count(first, last) == YEAR // 900 - 4

