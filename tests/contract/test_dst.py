"""DST with real zones: a missing local time fires once just after the gap; a
repeated one fires once, at its first occurrence; slot ids are UTC instants.

Each case adds a cron schedule with misfire="all", ticks once past the
transition, and compares the instance ids the tick created. The expected
instants follow the tz database on this machine (transition dates of
2026); a government changing its rules would change them.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

import fairq


def ts(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).replace(tzinfo=dt.timezone.utc).timestamp()


# (case, zone, cron, start UTC, tick at UTC, expected slots (UTC))
CASES = [
    ("Berlin spring: 02:30 does not exist, fires at 03:00 CEST", "Europe/Berlin", "30 2 * * *",
     "2026-03-28T00:00", "2026-03-30T12:00",
     ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
    ("Berlin spring: 02:00, 02:30 and 03:00 are one slot", "Europe/Berlin", "*/30 * * * *",
     "2026-03-29T00:00", "2026-03-29T01:45",
     ["2026-03-29T00:00:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]),
    ("Berlin fall: 02:30 occurs twice, fires at the first (CEST)", "Europe/Berlin", "30 2 * * *",
     "2026-10-24T00:00", "2026-10-26T12:00",
     ["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
    ("Berlin fall: hourly skips the repeated 02:30 CET", "Europe/Berlin", "30 * * * *",
     "2026-10-24T23:00", "2026-10-25T03:45",
     ["2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z", "2026-10-25T03:30:00Z"]),
    ("Berlin weekly across spring: midnight moves from 23:00Z to 22:00Z", "Europe/Berlin", "@weekly",
     "2026-03-20T00:00", "2026-04-05T00:00",
     ["2026-03-21T23:00:00Z", "2026-03-28T23:00:00Z", "2026-04-04T22:00:00Z"]),
    ("New York spring: 02:30 does not exist, fires at 03:00 EDT", "America/New_York", "30 2 * * *",
     "2026-03-07T00:00", "2026-03-09T12:00",
     ["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
    ("New York fall: 01:30 occurs twice, fires at the first (EDT)", "America/New_York", "30 1 * * *",
     "2026-10-31T00:00", "2026-11-02T12:00",
     ["2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]),
    ("Lord Howe spring (+30 min): 02:15 does not exist, fires at 02:30", "Australia/Lord_Howe", "15 2 * * *",
     "2026-10-02T12:00", "2026-10-04T18:00",
     ["2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"]),
    ("Lord Howe fall (-30 min): 01:45 occurs twice, fires at the first", "Australia/Lord_Howe", "45 1 * * *",
     "2026-04-03T12:00", "2026-04-05T18:00",
     ["2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"]),
    ("Lord Howe fall: every 15 min skips the repeated half hour", "Australia/Lord_Howe", "*/15 1-2 * * *",
     "2026-04-04T14:00", "2026-04-04T16:20",
     ["2026-04-04T14:00:00Z", "2026-04-04T14:15:00Z", "2026-04-04T14:30:00Z", "2026-04-04T14:45:00Z",
      "2026-04-04T15:30:00Z", "2026-04-04T15:45:00Z", "2026-04-04T16:00:00Z", "2026-04-04T16:15:00Z"]),
    ("Santiago spring: midnight of 6 Sep does not exist, fires at 01:00", "America/Santiago", "@daily",
     "2026-09-04T12:00", "2026-09-07T12:00",
     ["2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"]),
    ("Santiago fall: 23:30 of 4 Apr occurs twice, fires at the first", "America/Santiago", "30 23 * * *",
     "2026-04-03T12:00", "2026-04-06T12:00",
     ["2026-04-04T02:30:00Z", "2026-04-05T02:30:00Z", "2026-04-06T03:30:00Z"]),
    ("Cairo spring: midnight of 24 Apr does not exist, fires at 01:00", "Africa/Cairo", "@daily",
     "2026-04-22T12:00", "2026-04-25T12:00",
     ["2026-04-22T22:00:00Z", "2026-04-23T22:00:00Z", "2026-04-24T21:00:00Z"]),
    ("Cairo fall: 23:30 of 29 Oct occurs twice, fires at the first", "Africa/Cairo", "30 23 * * *",
     "2026-10-28T12:00", "2026-10-31T12:00",
     ["2026-10-28T20:30:00Z", "2026-10-29T20:30:00Z", "2026-10-30T21:30:00Z"]),
    ("UTC: hourly through Berlin's transition is untouched", "UTC", "0 * * * *",
     "2026-03-29T00:00", "2026-03-29T03:00",
     ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z"]),
]


@pytest.mark.parametrize("case, zone, cron, start, now, expected", CASES, ids=[c[0] for c in CASES])
def test_dst_slots_are_the_expected_utc_instants(make_queue, case, zone, cron, start, now, expected) -> None:
    q = make_queue()
    q.schedules.add("job", cron=cron, tz=zone, start=ts(start), misfire="all")
    created = q.tick(now=ts(now))
    assert [e.event_id for e in created] == [f"job@{slot}" for slot in expected]
    assert all(e.created for e in created)
    # Each instance is due exactly at its slot.
    for slot in expected:
        assert q.get(f"job@{slot}").due_at == ts(slot.rstrip("Z"))


def test_every_seconds_ignore_dst_entirely(q) -> None:
    q.schedules.add("job", every=3600, start=ts("2026-03-29T00:00"), misfire="all")
    assert [e.event_id for e in q.tick(now=ts("2026-03-29T02:00"))] == [
        "job@2026-03-29T00:00:00Z", "job@2026-03-29T01:00:00Z", "job@2026-03-29T02:00:00Z"]


def test_a_time_zone_only_applies_to_cron_schedules(q) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        q.schedules.add("job", every=3600, tz="Europe/Berlin")
    assert info.value.field == "tz"


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "../etc/passwd", "/etc/localtime", "America", 5])
def test_an_unknown_time_zone_is_refused(q, tz) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        q.schedules.add("job", cron="@daily", tz=tz, start=0)
    assert info.value.field == "tz"
    assert q.schedules.list() == []


@pytest.mark.parametrize("day, runs", [("2026-03-29", 23), ("2026-10-25", 24), ("2026-06-01", 24)])
def test_an_hourly_job_runs_once_per_local_hour_that_fires(q, day, runs) -> None:
    berlin = dt.datetime.fromisoformat(day).replace(tzinfo=zoneinfo.ZoneInfo("Europe/Berlin"))
    begin, end = berlin.timestamp(), (berlin + dt.timedelta(days=1)).timestamp()
    q.schedules.add("job", cron="@hourly", tz="Europe/Berlin", start=begin, misfire="all")
    slots = [e.event_id for e in q.tick(now=end - 1)]
    assert len(slots) == runs
    assert len(set(slots)) == runs
