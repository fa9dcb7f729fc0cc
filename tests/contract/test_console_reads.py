"""The reads and the bulk action the operator console is built on, through the Queue, on
every store: flows with their head, backlog and why they are blocked, paged by name;
events paged by key; redrive_many fenced per item and audited; a schedule's misfires,
newest slot first. (The HTTP shapes of the same answers are checked in
tests/test_http_console_api.py.)"""

from __future__ import annotations

from typing import Any

import pytest

import fairq


def quarantine(q: fairq.Queue, event_id: str, flow: str | None, now: float = 0) -> fairq.Lease:
    """Enqueue an event and fail it at once (its flow's only event)."""
    q.enqueue(event_id, {"id": event_id}, flow=flow, now=now)
    lease = q.claim(owner="w", now=now)
    assert lease is not None and lease.event_id == event_id
    q.fail(lease, "bad sku", now=now)
    return lease


def test_flows_list_each_named_flow_with_its_weight_head_backlog_and_why_it_is_blocked(q) -> None:
    quarantine(q, "dead", "dead-flow")
    q.enqueue("dead-2", 1, flow="dead-flow", now=0)
    q.enqueue("later", 1, flow="delayed-flow", delay=30, now=0)
    q.enqueue("held", 1, flow="leased-flow", now=0)
    q.enqueue("held-2", 2, flow="leased-flow", now=0)
    q.enqueue("held-3", 3, flow="leased-flow", now=0)
    held = q.claim(owner="ann", now=0)
    assert held is not None and held.event_id == "held"
    q.enqueue("done", 1, flow="acked-flow", now=0)
    q.ack(q.claim(now=0), now=0)
    q.enqueue("ready", 1, flow="ready-flow", now=0)
    q.set_weight("weighted-flow", 7)
    q.enqueue("loose", 1, now=0)  # no flow: never listed

    flows = q.flows(now=1)
    assert [(f.name, f.weight, f.backlog, f.blocked.why) for f in flows] == [
        ("acked-flow", 1, 0, "empty"), ("dead-flow", 1, 2, "quarantined"), ("delayed-flow", 1, 1, "delayed"),
        ("leased-flow", 1, 3, "leased"), ("ready-flow", 1, 1, "ready"), ("weighted-flow", 7, 0, "empty")]
    by_name = {f.name: f for f in flows}
    assert by_name["acked-flow"].head is None and by_name["weighted-flow"].head is None
    dead = by_name["dead-flow"].head
    assert dead is not None and (dead.event_id, dead.state, dead.reason) == ("dead", fairq.State.QUARANTINED, "bad sku")
    leased = by_name["leased-flow"]
    assert leased.head is not None and leased.head.event_id == "held" and leased.blocked.owner == "ann"
    assert by_name["delayed-flow"].blocked.until == 30
    # The listing answers what why_blocked and get answer, one flow at a time.
    for flow in flows:
        assert flow.blocked == q.why_blocked(flow.name, now=1)
        assert flow.head == (None if flow.head is None else q.get(flow.head.event_id))


def test_flows_page_by_name_after_the_last_one_seen_whatever_their_creation_order(q) -> None:
    for name in ("delta", "alpha", "echo", "charlie", "bravo"):
        q.enqueue(f"{name}-1", 1, flow=name, now=0)
    pages, after = [], None
    while page := q.flows(after=after, limit=2, now=0):
        pages.append([f.name for f in page])
        after = page[-1].name
    assert pages == [["alpha", "bravo"], ["charlie", "delta"], ["echo"]]
    # `after` need not be a stored flow: the listing goes on from where its name would sort.
    assert [f.name for f in q.flows(after="c", limit=10, now=0)] == ["charlie", "delta", "echo"]
    assert q.flows(after="echo", now=0) == []


def test_events_page_by_key_in_every_listing(q) -> None:
    for i in range(3):
        quarantine(q, f"dead-{i}", f"D{i}")
    for i in range(5):
        q.enqueue(f"a{i}", i, flow="A", now=0)
        q.enqueue(f"b{i}", i, flow="B", now=0)

    def pages(**filters: Any) -> list[list[str]]:
        out, after = [], None
        while page := q.events(limit=3, after=after, **filters):
            out.append([e.event_id for e in page])
            after = page[-1].event_id
        return out

    assert pages(flow="A") == [["a0", "a1", "a2"], ["a3", "a4"]]
    assert pages(state="quarantined") == [["dead-0", "dead-1", "dead-2"]]
    everything = [e.event_id for e in q.events(limit=100)]
    assert sum(pages(), []) == everything and len(everything) == 13
    assert sum(pages(state="ready"), []) == [e.event_id for e in q.events(state="ready", limit=100)]


def test_a_page_after_an_event_does_not_shift_when_earlier_events_leave_the_listing(q) -> None:
    for i in range(6):
        q.enqueue(f"e{i}", i, flow=f"f{i}", now=0)
    first = q.events(state="ready", limit=2)
    assert [e.event_id for e in first] == ["e0", "e1"]
    for _ in range(2):  # the first page's events are acked: they leave the ready listing
        q.ack(q.claim(now=0), now=0)
    second = q.events(state="ready", limit=2, after=first[-1].event_id)
    assert [e.event_id for e in second] == ["e2", "e3"]  # counting skipped rows would have skipped these


def test_events_after_an_unknown_event_is_refused_naming_after_and_writes_nothing(store, target, q) -> None:
    q.enqueue("e1", 1, flow="A", now=0)
    before = store.snapshot(target)
    for filters in ({}, {"flow": "A"}, {"state": "quarantined"}):
        with pytest.raises(fairq.InvalidInput) as caught:
            q.events(after="never-stored", **filters)
        assert caught.value.field == "after"
    assert store.snapshot(target) == before


def test_redrive_many_fences_each_item_by_its_own_generation_and_lists_the_refused(q) -> None:
    leases = [quarantine(q, f"dead-{i}", f"f{i}") for i in range(3)]
    q.enqueue("alive", 1, flow="other", now=0)
    results = q.redrive_many([("dead-0", leases[0].generation),
                              ("dead-1", leases[1].generation + 1),  # another generation
                              {"event_id": "alive", "expected_generation": 0},  # not quarantined
                              ("never-stored", 1),
                              ("dead-2", leases[2].generation),
                              ("dead-0", leases[0].generation)],  # its generation moved above
                             reason="sku fixed", actor="ops-ann", now=1)
    assert results[0] == leases[0].generation + 1 and results[4] == leases[2].generation + 1
    refused = [(i, r.event_id) for i, r in enumerate(results) if isinstance(r, fairq.RedriveRefused)]
    assert refused == [(1, "dead-1"), (2, "alive"), (3, "never-stored"), (5, "dead-0")]
    # The refused ones changed nothing; the others are ready for a new round.
    dead_1 = q.get("dead-1")
    assert dead_1.state is fairq.State.QUARANTINED and dead_1.generation == leases[1].generation
    assert q.get("alive").state is fairq.State.READY and q.get("alive").generation == 0
    for event_id in ("dead-0", "dead-2"):
        info = q.get(event_id)
        assert info.state is fairq.State.READY and info.attempts == 0
    # One audit row per redrive, each with the actor and the reason.
    redrives = [(a.event_id, a.action, a.actor, a.reason, a.generation, a.at) for a in q.audit()
                if a.action == "redrive"]
    assert redrives == [("dead-0", "redrive", "ops-ann", "sku fixed", leases[0].generation + 1, 1.0),
                        ("dead-2", "redrive", "ops-ann", "sku fixed", leases[2].generation + 1, 1.0)]
    assert q.stats(now=1).counts["quarantined"] == 1


def test_redrive_many_with_one_bad_item_is_refused_whole_and_writes_nothing(store, target, q) -> None:
    lease = quarantine(q, "dead", "f")
    before = store.snapshot(target)
    with pytest.raises(fairq.InvalidInput) as caught:
        q.redrive_many([("dead", lease.generation), {"event_id": "dead"}], reason="x", now=1)
    assert caught.value.field == "items[1].expected_generation"
    with pytest.raises(fairq.InvalidInput) as caught:
        q.redrive_many([("dead", lease.generation)], reason="", now=1)
    assert caught.value.field == "reason"
    assert store.snapshot(target) == before


def test_a_schedules_misfires_are_listed_newest_slot_first_and_only_its_own(q) -> None:
    for name in ("beat", "beat@x"):  # a name holding "@" shares the other's instance id prefix
        q.schedules.add(name, every=60, start=0, misfire="skip", grace=0)
    for minutes in range(1, 6):  # each tick finds the slots since the last one late: one misfire row
        q.tick(now=minutes * 130)
    audited = [a for a in q.audit() if a.action == "misfire" and a.detail["schedule"] == "beat"]
    assert len(audited) >= 4
    assert q.schedules.misfires("beat", limit=100) == audited[::-1]
    newest = q.schedules.misfires("beat", limit=2)
    assert newest == audited[:-3:-1] and newest[0].event_id > newest[1].event_id
    assert all(m.detail["schedule"] == "beat@x" for m in q.schedules.misfires("beat@x", limit=100))
    with pytest.raises(fairq.UnknownSchedule):
        q.schedules.misfires("nope")


def test_the_audit_log_pages_after_a_row_id_oldest_first_for_the_queue_and_for_one_event(q) -> None:
    for i in range(5):
        quarantine(q, f"bad-{i}", f"flow-{i}")
    q.redrive("bad-2", expected_generation=1, reason="fixed", now=1)
    log = q.audit()
    ids = [entry.id for entry in log]
    assert len(log) == 6 and ids == sorted(ids) and len(set(ids)) == 6
    pages, after = [], None
    while page := q.audit(after=after, limit=2):
        pages.append(page)
        after = page[-1].id
    assert [len(p) for p in pages] == [2, 2, 2] and [e for p in pages for e in p] == log
    assert q.audit(after=ids[-1]) == []
    history = q.audit("bad-2")
    assert [e.action for e in history] == ["quarantine", "redrive"]
    assert q.audit("bad-2", after=history[0].id) == history[1:]
    with pytest.raises(fairq.InvalidInput) as refused:
        q.audit(after=-1)
    assert refused.value.field == "after"
