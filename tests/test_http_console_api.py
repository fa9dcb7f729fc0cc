"""The endpoints the console reads and acts through, over a real loopback server: flows
and quarantine listings paged by keyset, the bulk redrive fenced per item, schedule
misfires, server info and claim rates; read-only and console-only servers; the console's
files with their content types and security headers."""

from __future__ import annotations

import time

import pytest

import fairq
from fairq.http.rates import per_minute
from helpers import TOKEN, eventually, raw, running


def quarantine(q: fairq.Queue, event_id: str, flow: str, reason: str = "bad sku") -> fairq.Lease:
    q.enqueue(event_id, {"id": event_id}, flow=flow)
    while True:
        lease = q.claim(owner="w")
        assert lease is not None
        if lease.event_id == event_id:
            q.fail(lease, reason)
            return lease
        q.ack(lease)


def test_flows_lists_each_named_flow_with_weight_head_backlog_and_why_it_is_blocked(server, client) -> None:
    q = server.queue  # on the server's clock
    quarantine(q, "b1", "beta")
    q.enqueue("a1", 1, flow="alpha")
    q.enqueue("a2", 2, flow="alpha")
    q.enqueue("b2", 3, flow="beta")
    q.set_weight("gamma", 7)
    flows = client.flows()
    assert [(f.name, f.weight, f.backlog) for f in flows] == [("alpha", 1, 2), ("beta", 1, 2), ("gamma", 7, 0)]
    alpha, beta, gamma = flows
    assert alpha.head is not None and alpha.head.event_id == "a1" and alpha.blocked.why == "ready"
    assert beta.head is not None and beta.head.state is fairq.State.QUARANTINED and beta.head.reason == "bad sku"
    assert beta.blocked.why == "quarantined" and f"--url {server.url}" in (beta.blocked.redrive or "")
    assert f"fairq --url {server.url} discard b1 --expected-generation " in (beta.blocked.discard or "")
    assert gamma.head is None and gamma.blocked.why == "empty"
    local = q.flows()
    assert [(f.name, f.head, f.blocked.why) for f in local] == [(f.name, f.head, f.blocked.why) for f in flows]


def test_flows_page_by_name_after_the_last_one_seen(client, q) -> None:
    for name in ("d", "a", "c", "b", "e"):
        q.enqueue(f"{name}-1", 1, flow=name)
    first = client.flows(limit=2)
    second = client.flows(after=first[-1].name, limit=2)
    third = client.flows(after=second[-1].name, limit=2)
    assert [[f.name for f in page] for page in (first, second, third)] == [["a", "b"], ["c", "d"], ["e"]]
    assert client.flows(after="e") == []


def test_events_page_the_quarantine_after_the_last_event_id_and_refuse_an_unknown_one(client, q) -> None:
    for i in range(5):
        quarantine(q, f"dead-{i}", f"f{i}")
    pages, after = [], None
    while page := client.events(state="quarantined", limit=2, after=after):
        pages.append([e.event_id for e in page])
        after = page[-1].event_id
    assert pages == [["dead-0", "dead-1"], ["dead-2", "dead-3"], ["dead-4"]]
    q.enqueue("x2", 1, flow="f0")
    assert [e.event_id for e in client.events(flow="f0", after="dead-0")] == ["x2"]
    with pytest.raises(fairq.InvalidInput) as caught:
        client.events(after="never-stored")
    assert caught.value.field == "after"


def test_redrive_many_redrives_each_at_its_own_generation_and_lists_the_refused(server, client, q) -> None:
    leases = [quarantine(q, f"dead-{i}", f"f{i}") for i in range(3)]
    q.enqueue("alive", 1, flow="other")
    items = [{"event_id": "dead-0", "expected_generation": leases[0].generation},
             {"event_id": "dead-1", "expected_generation": leases[1].generation + 5},
             {"event_id": "alive", "expected_generation": 0},
             {"event_id": "dead-2", "expected_generation": leases[2].generation}]
    answer = raw(server, "POST", "/v1/redrive_many", {"items": items, "reason": "sku fixed", "actor": "ops-ann"})
    assert answer.status == 200
    assert [(r["index"], r["event_id"], r["generation"]) for r in answer.json["redriven"]] == [
        (0, "dead-0", leases[0].generation + 1), (3, "dead-2", leases[2].generation + 1)]
    assert [(r["index"], r["event_id"], r["error"]) for r in answer.json["refused"]] == [
        (1, "dead-1", "redrive_refused"), (2, "alive", "redrive_refused")]
    assert "generation" in answer.json["refused"][0]["message"]
    assert q.get("dead-1").state is fairq.State.QUARANTINED and q.get("dead-1").generation == leases[1].generation
    assert q.get("dead-0").state is fairq.State.READY
    redrives = [a for a in q.audit() if a.action == "redrive"]
    assert [(a.event_id, a.actor, a.reason) for a in redrives] == [("dead-0", "ops-ann", "sku fixed"),
                                                                  ("dead-2", "ops-ann", "sku fixed")]


def test_client_redrive_many_answers_a_generation_or_the_refusal_in_each_slot(client, q) -> None:
    lease = quarantine(q, "dead", "f")
    results = client.redrive_many([("dead", lease.generation), ("dead", lease.generation)], reason="again")
    assert results[0] == lease.generation + 1
    assert isinstance(results[1], fairq.RedriveRefused) and results[1].event_id == "dead"
    local = q.redrive_many([("dead", lease.generation)], reason="stale")
    assert isinstance(local[0], fairq.RedriveRefused)


def test_redrive_many_without_a_reason_is_refused_and_redrives_nothing(server, q) -> None:
    lease = quarantine(q, "dead", "f")
    answer = raw(server, "POST", "/v1/redrive_many",
                 {"items": [{"event_id": "dead", "expected_generation": lease.generation}], "reason": ""})
    assert (answer.status, answer.json["field"]) == (400, "reason")
    answer = raw(server, "POST", "/v1/redrive_many", {"items": [{"event_id": "dead"}], "reason": "x"})
    assert (answer.status, answer.json["field"]) == (400, "items[0].expected_generation")
    assert q.get("dead").state is fairq.State.QUARANTINED


def test_schedule_misfires_are_listed_newest_first(client, q) -> None:
    start = time.time() - 1000
    for name in ("beat", "beat@x"):  # a name holding "@" shares the other's instance id prefix
        q.schedules.add(name, every=60, start=start, misfire="skip", grace=0)
    for minutes in range(1, 5):  # each tick finds the slots since the last one late: one misfire row
        q.tick(now=start + minutes * 130)
    found = client.schedules.misfires("beat", limit=3)
    assert len(found) == 3 and all(m.action == "misfire" and m.detail["schedule"] == "beat" for m in found)
    assert found[0].event_id > found[1].event_id > found[2].event_id
    audited = [a for a in q.audit() if a.action == "misfire" and a.detail["schedule"] == "beat"]
    assert len(audited) > 3 and q.schedules.misfires("beat", limit=100) == audited[::-1]
    with pytest.raises(fairq.UnknownSchedule):
        client.schedules.misfires("nope")


def test_info_answers_the_schema_version_and_the_stored_policy(server, q) -> None:
    answer = raw(server, "GET", "/v1/info")
    assert answer.status == 200
    assert answer.json["schema_version"] == q.schema_version >= 1
    assert answer.json["policy"]["max_attempts"] == q.policy().max_attempts == 3
    assert answer.json["read_only"] is False


def test_rates_per_minute_are_the_growth_of_the_totals_between_minutes() -> None:
    samples = [(600.0, 10, 5), (630.0, 15, 9), (665.0, 40, 20), (790.0, 100, 80)]
    assert per_minute(samples) == [{"minute": 660, "claimed": 25.0, "acked": 11.0},
                                   {"minute": 720, "claimed": 30.0, "acked": 30.0},
                                   {"minute": 780, "claimed": 30.0, "acked": 30.0}]


def test_rates_answers_the_claims_and_acks_of_the_last_minute_from_the_server_samples(make_queue, clock) -> None:
    queue = make_queue(clock=clock)
    with running(queue, sample_seconds=3600) as server:
        assert server.rates is not None
        eventually(lambda: server.rates.samples == 1)  # sampled once at start
        for i in range(3):
            queue.enqueue(f"e{i}", i)
            lease = queue.claim()
            if i:
                queue.ack(lease)
        clock.advance(60)
        server.rates.sample()
        answer = raw(server, "GET", "/v1/rates")
    assert answer.status == 200 and answer.json["sample_seconds"] == 3600
    assert answer.json["minutes"][-1] == {"minute": (clock.now // 60) * 60, "claimed": 3, "acked": 2}


def test_a_read_only_server_refuses_every_action_and_still_answers_reads(make_queue) -> None:
    queue = make_queue()
    lease = quarantine(queue, "dead", "f")
    with running(queue, read_only=True) as server:
        refused = [raw(server, "POST", "/v1/redrive", {"event_id": "dead", "expected_generation": lease.generation,
                                                       "reason": "x"}),
                   raw(server, "POST", "/v1/set_weight", {"flow": "f", "weight": 3}),
                   raw(server, "POST", "/v1/enqueue", {"event_id": "n", "body": 1})]
        info = raw(server, "GET", "/v1/info")
        listed = raw(server, "GET", "/v1/events?state=quarantined")
    assert [(a.status, a.json["error"]) for a in refused] == [(403, "forbidden")] * 3
    assert "read-only" in refused[0].json["message"]
    assert info.json["read_only"] is True and [e["event_id"] for e in listed.json["events"]] == ["dead"]
    assert queue.get("dead").state is fairq.State.QUARANTINED and queue.get("n") is None
    assert [f.weight for f in queue.flows()] == [1]


def test_a_console_only_server_serves_the_console_api_and_nothing_else(make_queue) -> None:
    with running(make_queue(), console_only=True) as server:
        claim = raw(server, "POST", "/v1/claim", {})
        health = raw(server, "GET", "/healthz")
        stats = raw(server, "GET", "/v1/stats")
        page = raw(server, "GET", "/ui/", token=None)
    assert (claim.status, claim.json["error"]) == (404, "not_found")
    assert health.status == 404 and stats.status == 200 and page.status == 200


def test_the_console_files_are_served_without_a_token_with_their_types_and_a_strict_policy(server) -> None:
    page = raw(server, "GET", "/ui/", token=None)
    script = raw(server, "GET", "/ui/console.js", token=None)
    style = raw(server, "GET", "/ui/console.css", token=None)
    assert page.status == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert style.headers["Content-Type"] == "text/css; charset=utf-8"
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff" and page.headers["X-Frame-Options"] == "DENY"
    assert '<script src="console.js"' in page.text and "http" not in page.text.split("<body")[0].replace(
        'http-equiv', '')
    assert raw(server, "GET", "/ui", token=None).headers["Location"] == "/ui/"
    for missing in ("/ui/nope.js", "/ui/..%2Fserver.py", "/ui/index.py"):
        assert raw(server, "GET", missing, token=None).status == 404, missing
    assert raw(server, "GET", "/v1/flows", token=None).status == 401  # the data still needs the token


def test_every_json_answer_says_nosniff(server) -> None:
    assert raw(server, "GET", "/v1/stats", token=TOKEN).headers["X-Content-Type-Options"] == "nosniff"
