"""Schedules and tick over a real loopback server: status codes, and client.schedules
returning the same Schedule values and raising the same errors as q.schedules."""

from __future__ import annotations

import math
import time

import pytest

import fairq
from helpers import TOKEN, eventually, raw, running, start_serve


def test_schedules_added_over_the_wire_are_the_ones_a_local_queue_reads(server, client, make_queue, clock) -> None:
    every = client.schedules.add("every-minute", every=60, start=1000.5, body={"report": "sales"},
                                 misfire="skip", grace=30)
    nightly = client.schedules.add("nightly", cron="0 3 * * *", tz="Europe/Berlin", overlap=True, start=0)
    assert isinstance(every, fairq.Schedule) and every.misfire is fairq.Misfire.SKIP
    assert (every.flow, every.grace, every.next_slot, every.body) == ("every-minute", 30.0, 1000.5, {"report": "sales"})
    assert (nightly.flow, nightly.tz, nightly.misfire) == (None, "Europe/Berlin", fairq.Misfire.COALESCE)
    local = make_queue()
    assert client.schedules.list() == local.schedules.list() == [every, nightly]
    assert client.schedules.get("nightly") == local.schedules.get("nightly") == nightly
    assert client.schedules.add("nightly", cron="0 3 * * *", tz="Europe/Berlin", overlap=True) == nightly
    answer = raw(server, "POST", "/v1/schedules", {"name": "later", "every": 5})
    assert answer.status == 200 and answer.json["next_slot"] == clock.now  # the server's clock


def test_pause_resume_and_remove_change_the_stored_schedule(server, client, make_queue) -> None:
    client.schedules.add("report", every=60, start=0)
    assert client.schedules.pause("report").paused is True
    assert make_queue().schedules.get("report").paused is True
    assert client.schedules.resume("report").paused is False
    answer = raw(server, "POST", "/v1/schedules/report/pause", {})
    assert (answer.status, answer.json["paused"]) == (200, True)
    assert raw(server, "DELETE", "/v1/schedules/report").json == {"name": "report", "removed": True}
    client.schedules.add("report", every=60, start=0)
    client.schedules.remove("report")
    assert make_queue().schedules.list() == []


def test_an_unknown_schedule_is_404_and_the_client_answers_as_a_local_queue(server, client, make_queue) -> None:
    for method, path in [("GET", "/v1/schedules/nope"), ("DELETE", "/v1/schedules/nope"),
                         ("POST", "/v1/schedules/nope/pause"), ("POST", "/v1/schedules/nope/resume")]:
        answer = raw(server, method, path, {} if method == "POST" else None)
        assert (answer.status, answer.json["error"], answer.json["field"]) == (404, "unknown_schedule", "name")
    local = make_queue()
    for schedules in (client.schedules, local.schedules):
        for verb in (schedules.get, schedules.remove, schedules.pause, schedules.resume):
            with pytest.raises(fairq.UnknownSchedule) as caught:
                verb("nope")
            assert isinstance(caught.value, fairq.InvalidInput) and caught.value.field == "name"
            assert "no schedule is called 'nope'" in str(caught.value)


def test_a_refused_schedule_is_400_naming_the_field_the_queue_names(server, client, make_queue) -> None:
    client.schedules.add("report", every=60, start=0)
    cases = [
        (dict(every=60, cron="@daily"), "every"),
        (dict(cron="61 * * * *"), "cron"),
        (dict(cron="@daily", tz="Mars/Olympus"), "tz"),
        (dict(every=60, misfire="sometimes"), "misfire"),
        (dict(every=60, misfire="skip"), "grace"),
        (dict(every=60, body={"x": math.inf}), "body.x"),
    ]
    for kwargs, field in cases:
        with pytest.raises(fairq.InvalidInput) as caught:
            client.schedules.add("new", **kwargs)
        assert caught.value.field.startswith(field), (kwargs, caught.value)
    with pytest.raises(fairq.InvalidInput) as caught:
        client.schedules.add("report", every=30, start=0)  # a different definition under the name
    assert caught.value.field == "name" and "different every" in str(caught.value)
    answer = raw(server, "POST", "/v1/schedules", {"name": "new", "every": 60, "when": "now"})
    assert (answer.status, answer.json["field"]) == (400, "when")
    assert raw(server, "POST", "/v1/schedules/report/pause", {"now": 1}).status == 400
    assert [s.name for s in make_queue().schedules.list()] == ["report"]


def test_tick_over_the_wire_creates_each_due_instance_once(server, client, make_queue, clock) -> None:
    start = clock.now - 150
    schedule = client.schedules.add("report", every=60, start=start, misfire="all")
    first = raw(server, "POST", "/v1/tick", {})
    assert first.status == 201
    assert [e["event_id"] for e in first.json["enqueued"]] == [schedule.instance_id(start + k * 60) for k in range(3)]
    assert client.tick() == []  # nothing new is due
    assert raw(server, "POST", "/v1/tick", {}).status == 200
    ahead = client.tick(ahead=120)
    assert [e.event_id for e in ahead] == [schedule.instance_id(start + k * 60) for k in (3, 4)]
    assert all(isinstance(e, fairq.Enqueued) and e.created and e.flow == "report" for e in ahead)
    assert make_queue().get(ahead[0].event_id).body["schedule"] == "report"
    with pytest.raises(fairq.InvalidInput) as caught:
        client.tick(ahead=-1)
    assert caught.value.field == "ahead"
    with pytest.raises(fairq.InvalidInput) as caught:
        client.tick(now=clock.now)
    assert caught.value.field == "now"
    assert len(make_queue().events()) == 5


def test_a_ticking_server_turns_a_slot_into_its_instance_once_the_slot_is_due(make_queue, clock) -> None:
    queue = make_queue(clock=clock)
    schedule = queue.schedules.add("report", every=60, start=clock.now + 60)
    with running(queue, tick_seconds=0.02) as server:
        assert eventually(lambda: server.ticker.ticks >= 3)
        assert queue.events() == []  # not due yet
        clock.advance(60)
        assert eventually(lambda: queue.events())
        assert [e.event_id for e in queue.events()] == [schedule.instance_id(clock.now)]
        ticks = server.ticker.ticks
        assert eventually(lambda: server.ticker.ticks >= ticks + 3)
        assert len(queue.events()) == 1  # the slot was decided once
    assert not server.ticker.running  # stopped with the server


def test_fairq_serve_ticks_schedules_unless_told_not_to(tmp_path) -> None:
    # A ticking server ticks as it starts and then every second. The quiet server's schedule is
    # due before it starts, and it starts first: had it ticked, its instance would be there by the
    # time the ticking server has turned a schedule added while it runs into its instance.
    due_now = time.time() - 1
    with fairq.Queue(tmp_path / "b.db") as q:
        q.schedules.add("report", every=3600, start=due_now)
    quiet, quiet_url = start_serve(tmp_path / "b.db", "--port", "0", "--no-tick", env={"FAIRQ_TOKEN": TOKEN})
    quiet_started = time.monotonic()
    ticking, url = start_serve(tmp_path / "a.db", "--port", "0", env={"FAIRQ_TOKEN": TOKEN})
    try:
        client = fairq.Client(url, token=TOKEN)
        client.schedules.add("report", every=3600, start=due_now)
        found = eventually(lambda: client.events(), seconds=30)  # within about a second
        assert [e.flow for e in found] == ["report"]
        time.sleep(max(0.0, quiet_started + 1.5 - time.monotonic()))  # and a beat of the quiet one
        assert fairq.Client(quiet_url, token=TOKEN).events() == []
    finally:
        said = {}
        for name, proc in (("ticking", ticking), ("quiet", quiet)):
            proc.terminate()
            said[name] = proc.communicate(timeout=30)[1]  # the timeout only stops a hang
    assert "not ticking schedules (--no-tick)" in said["quiet"] and "not ticking" not in said["ticking"]
