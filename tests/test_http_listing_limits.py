"""Every listing the server answers is one bounded page: a default page when no
limit is named, a limit over the most a page holds refused naming `limit`, and
keyset paging (`after`, answered as `next`) that returns every row exactly once.
A real loopback server; fairq.Client pages for its caller."""

from __future__ import annotations

import time

import pytest

import fairq
from fairq.limits import MAX_PAGE
from helpers import TOKEN, raw, running

DEFAULT_PAGE = 100


@pytest.fixture
def served(make_queue):
    q = make_queue()
    with running(q) as server:
        yield server, q, fairq.Client(server.url, token=TOKEN, timeout=30)


def _fill(q: fairq.Queue, n: int, *, flows: int = 7) -> list[str]:
    ids = [f"e{i:05d}" for i in range(n)]
    q.enqueue_many([(event_id, {"i": i}, f"flow-{i % flows:03d}") for i, event_id in enumerate(ids)])
    return ids


def _quarantined(q: fairq.Queue, n: int) -> None:
    """n events quarantined at once: an audit row each."""
    q.enqueue_many([(f"dead{i:05d}", i, f"dead-{i:05d}") for i in range(n)])
    leases = q.claim_many(n, owner="w")
    assert len(leases) == n
    q.settle_many([(lease, "fail", "bad") for lease in leases])


def _misfire(q: fairq.Queue, name: str, times: int) -> None:
    start = time.time() - 10 * 86400
    q.schedules.add(name, every=60, start=start, misfire="skip", grace=0)
    for minutes in range(1, times + 1):  # each tick finds the slots since the last one late: one misfire row
        q.tick(now=start + minutes * 130)


LISTINGS = [  # (path, key of its rows, how the answer says whether rows were left off, default page)
    ("/v1/events", "events", "next", DEFAULT_PAGE),
    ("/v1/flows", "flows", "next", DEFAULT_PAGE),
    ("/v1/schedules", "schedules", "next", DEFAULT_PAGE),
    ("/v1/audit", "audit", "next", DEFAULT_PAGE),
    ("/v1/schedules/beat/misfires", "misfires", "more", 20),
]


def _more_rows_than_every_default_page(q: fairq.Queue) -> None:
    _misfire(q, "beat", 25)  # first: its ticks are in the past of every later call
    _quarantined(q, DEFAULT_PAGE + 10)
    for i in range(DEFAULT_PAGE + 10):
        q.schedules.add(f"s{i:03d}", every=3600)


@pytest.mark.parametrize("path,key,tells,default", LISTINGS, ids=[p for p, *_ in LISTINGS])
def test_a_listing_without_a_limit_answers_the_default_page_and_says_rows_were_left_off(
        served, path, key, tells, default) -> None:
    server, q, _ = served
    _more_rows_than_every_default_page(q)
    answer = raw(server, "GET", path)
    assert answer.status == 200, answer.json
    assert len(answer.json[key]) == default
    assert answer.json[tells] not in (None, False)  # rows were left off, and the answer says so


@pytest.mark.parametrize("path,key,tells,default", LISTINGS, ids=[p for p, *_ in LISTINGS])
@pytest.mark.parametrize("limit", [MAX_PAGE + 1, 1_000_000, 0, -1])
def test_a_limit_outside_one_page_is_refused_naming_limit(served, path, key, tells, default, limit) -> None:
    server, q, _ = served
    _misfire(q, "beat", 1)
    answer = raw(server, "GET", f"{path}?limit={limit}")
    assert (answer.status, answer.json["error"], answer.json["field"]) == (400, "invalid_input", "limit")


def test_a_full_last_page_says_there_is_none_after_it(served) -> None:
    server, q, _ = served
    _fill(q, 10)
    answer = raw(server, "GET", "/v1/events?limit=10")
    assert len(answer.json["events"]) == 10 and answer.json["next"] is None
    answer = raw(server, "GET", "/v1/events?limit=9")
    assert len(answer.json["events"]) == 9 and answer.json["next"] == "e00008"


def _walk(server, path: str, key: str, name: str, limit: int, query: str = "") -> list[str]:
    seen, after = [], None
    for _ in range(10_000):  # bounded: a page that never ends would fail, not hang
        target = f"{path}?limit={limit}{query}" + ("" if after is None else f"&after={after}")
        answer = raw(server, "GET", target)
        assert answer.status == 200, answer.json
        assert len(answer.json[key]) <= limit
        seen += [row[name] for row in answer.json[key]]
        after = answer.json["next"]
        if after is None:
            return seen
    raise AssertionError("the listing never ended")


def test_paging_through_events_flows_and_schedules_returns_every_row_exactly_once(served) -> None:
    server, q, _ = served
    ids = _fill(q, 2345, flows=211)
    for i in range(230):
        q.schedules.add(f"s{i:03d}", every=3600)
    assert _walk(server, "/v1/events", "events", "event_id", MAX_PAGE) == ids
    assert _walk(server, "/v1/events", "events", "event_id", 333, "&flow=flow-005") == [
        e for i, e in enumerate(ids) if i % 211 == 5]
    assert _walk(server, "/v1/flows", "flows", "name", 50) == sorted({f"flow-{i:03d}" for i in range(211)})
    assert _walk(server, "/v1/schedules", "schedules", "name", 100) == [f"s{i:03d}" for i in range(230)]


def test_the_client_pages_for_its_caller_so_its_listings_match_the_queue(served) -> None:
    server, q, client = served
    ids = _fill(q, 2345, flows=211)
    for i in range(230):
        q.schedules.add(f"s{i:03d}", every=3600)
    assert [e.event_id for e in client.events(limit=2400)] == ids
    assert [e.event_id for e in client.events(limit=1500, after="e00100")] == ids[101:1601]
    assert client.events(state="ready", limit=2345) == q.events(state="ready", limit=2345)
    assert [f.name for f in client.flows(limit=10_000)] == [f.name for f in q.flows(limit=10_000)]
    assert [s.name for s in client.schedules.list()] == [s.name for s in q.schedules.list()]
    for bad in (0, 1_000_001, True, "10"):
        with pytest.raises(fairq.InvalidInput) as refused:
            client.events(limit=bad)
        with pytest.raises(fairq.InvalidInput) as local:
            q.events(limit=bad)
        assert refused.value.field == local.value.field == "limit"


def test_the_audit_log_pages_by_row_id_and_the_client_reads_all_of_it(served) -> None:
    server, q, client = served
    _quarantined(q, MAX_PAGE + 5)
    log = q.audit()
    ids = [e.id for e in log]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == MAX_PAGE + 5
    assert _walk(server, "/v1/audit", "audit", "id", 300) == ids  # every row exactly once, in order
    assert client.audit() == log  # past one page, as the Queue answers
    assert client.audit(limit=7, after=ids[3]) == q.audit(limit=7, after=ids[3]) == log[4:11]
    one = log[0].event_id
    assert client.audit(one) == q.audit(one)
    with pytest.raises(fairq.InvalidInput) as refused:
        client.audit(after=-1)
    assert refused.value.field == "after"


def test_the_reported_request_for_a_million_events_is_refused_before_anything_is_read(served) -> None:
    server, q, _ = served
    _fill(q, 10)
    answer = raw(server, "GET", "/v1/events?limit=1000000")
    assert (answer.status, answer.json["field"]) == (400, "limit")
    assert str(MAX_PAGE) in answer.json["message"]
