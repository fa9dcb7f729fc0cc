"""Every endpoint over a real loopback server: status codes, bodies, and fairq.Client
returning the same values and raising the same errors as a local Queue."""

from __future__ import annotations

import inspect
import logging
import sqlite3

import pytest

import fairq
from fairq.api.verbs import Place, VERBS
from fairq.http.routes import ROUTES
from fairq.http.wire import STATUS, LeaseRef, from_json, to_json
from fairq.metrics import exposition
from helpers import ROOT, TOKEN, parse, raw, running


def test_healthz_answers_without_a_token(server) -> None:
    answer = raw(server, "GET", "/healthz", token=None)
    assert (answer.status, answer.json) == (200, {"status": "ok"})


def test_enqueue_answers_201_when_created_and_200_for_an_identical_repeat(server, make_queue) -> None:
    first = raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {"n": 1}, "flow": "F"})
    again = raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {"n": 1}, "flow": "F"})
    assert (first.status, again.status) == (201, 200)
    assert first.json == {"event_id": "a", "flow": "F", "seq": 1, "created": True}
    assert again.json["created"] is False
    assert make_queue().get("a").body == {"n": 1}


def test_a_conflicting_enqueue_is_409_and_writes_nothing(server, client, make_queue) -> None:
    client.enqueue("a", {"n": 1}, flow="F")
    answer = raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {"n": 2}, "flow": "F"})
    assert answer.status == 409
    assert answer.json["error"] == "conflict" and answer.json["field"] == "body"
    with pytest.raises(fairq.Conflict) as caught:
        client.enqueue("a", {"n": 1}, flow="G")
    assert caught.value.field == "flow" and caught.value.event_id == "a"
    assert [e.body for e in make_queue().events()] == [{"n": 1}]


def test_enqueue_many_takes_tuples_dicts_and_arrays_in_one_call(server, client, make_queue) -> None:
    done = client.enqueue_many([("a", 1), ("b", 2.0, "F"), {"event_id": "c", "body": [3], "flow": "F", "delay": 0}])
    assert [(e.event_id, e.flow, e.seq, e.created) for e in done] == [
        ("a", None, 1, True), ("b", "F", 1, True), ("c", "F", 2, True)]
    answer = raw(server, "POST", "/v1/enqueue_many", {"items": [["d", {}, "F"], ["a", 1]]})
    assert answer.status == 201 and [e["created"] for e in answer.json["enqueued"]] == [True, False]
    assert raw(server, "POST", "/v1/enqueue_many", {"items": [["a", 1]]}).status == 200
    bodies = {e.event_id: e.body for e in make_queue().events()}
    assert bodies == {"a": 1, "b": 2.0, "c": [3], "d": {}}
    assert type(bodies["b"]) is float  # 2.0 stays a float across the wire


def test_an_enqueue_many_with_one_bad_item_writes_nothing(client, make_queue) -> None:
    with pytest.raises(fairq.InvalidInput) as caught:
        client.enqueue_many([("a", 1), {"event_id": "b", "body": {"x": float("nan")}}])
    assert caught.value.field == "items[1].body.x"
    with pytest.raises(fairq.InvalidInput) as caught:
        client.enqueue_many([("a", 1), ("b", 2, 7)])
    assert caught.value.field == "items[1].flow"  # refused by the server's Queue
    assert make_queue().events() == []


def test_claim_answers_204_when_nothing_is_claimable(server, client) -> None:
    answer = raw(server, "POST", "/v1/claim", {})
    assert (answer.status, answer.text) == (204, "")
    assert raw(server, "POST", "/v1/claim_many", {"n": 5}).status == 204
    assert client.claim() is None
    assert client.claim_many(5) == []


def test_a_lease_crosses_the_wire_and_is_settled_with_it(client, make_queue) -> None:
    client.enqueue("a", {"sku": "book"}, flow="F")
    lease = client.claim(owner="remote-1", lease_seconds=20)
    assert isinstance(lease, fairq.Lease)
    assert (lease.event_id, lease.flow, lease.seq, lease.body) == ("a", "F", 1, {"sku": "book"})
    assert (lease.generation, lease.attempts, lease.owner) == (1, 1, "remote-1")
    local = make_queue().get("a")
    assert local.state is fairq.State.INFLIGHT and local.lease_until == lease.lease_until
    settled = client.ack(lease)
    assert settled == fairq.Settled("a", fairq.State.ACKED, None, 1)
    assert make_queue().get("a").state is fairq.State.ACKED


def test_retry_and_fail_over_the_wire_return_what_queue_returns(client, make_queue, clock) -> None:
    client.enqueue_many([("a", 1, "A"), ("b", 2, "B")])
    first, second = client.claim_many(2)
    retried = client.retry(first, "later", delay=60)
    assert retried.state is fairq.State.READY and retried.next_at == clock.now + 60
    failed = client.fail(second, "broken")
    assert failed.state is fairq.State.QUARANTINED
    assert make_queue().get(second.event_id).reason == "broken"


def test_settle_many_reports_lost_leases_in_their_slots(client, make_queue) -> None:
    client.enqueue_many([("a", 1, "A"), ("b", 2, "B")])
    a, b = client.claim_many(2, owner="w")
    client.ack(a)
    results = client.settle_many([(a, "ack"), (b, "retry", "again")])
    assert isinstance(results[0], fairq.StaleLease) and results[0].event_id == "a"
    assert results[0].generation == 1
    assert isinstance(results[1], fairq.Settled) and results[1].state is fairq.State.READY
    assert make_queue().get("b").reason == "again"
    assert client.settle_many([]) == []


def local_twin(server, tmp_path) -> fairq.Queue:
    """A local Queue like the server's (same settings, same clock) on a file of its own."""
    return fairq.Queue(tmp_path / "local.db", **server.queue.settings())


def test_settle_many_with_delays_answers_exactly_what_a_local_queue_answers(server, client, tmp_path) -> None:
    local = local_twin(server, tmp_path)
    answers = []
    for q in (client, local):
        q.enqueue_many([("a", 1, "A"), ("b", 2, "B"), ("c", 3, "C"), ("d", 4, "D")])
        a, b, c, d = q.claim_many(4, owner="w", lease_seconds=30)
        # The 4-item form a worker sends for its retry delays, mixed with the shorter ones.
        answers.append(q.settle_many([(a, "retry", "later", 60), (b, "retry", "now", 0.0), (c, "release"),
                                      (d, "fail", "broken", None)]))
    remote, here = answers
    assert remote == here and [r.state for r in remote] == ["ready", "ready", "ready", "quarantined"]
    assert remote[0].next_at == server.queue._clock() + 60 and remote[1].next_at == server.queue._clock()
    assert client.events() == local.events() and client.audit() == local.audit()
    local.close()


def test_settle_many_refuses_what_a_local_queue_refuses(client, make_queue) -> None:
    client.enqueue_many([("a", 1, "A"), ("b", 2, "B")])
    a, b = client.claim_many(2)
    with pytest.raises(fairq.InvalidInput) as caught:
        client.settle_many([(a, "ack"), (b, "ack", None, 5)])
    assert caught.value.field == "items[1].delay"  # refused by the server's Queue: an ack takes no delay
    with pytest.raises(fairq.InvalidInput) as caught:
        client.settle_many([(a, "ack", None, None, "result", "extra")])
    assert caught.value.field == "items[0]"
    assert {e.state for e in make_queue().events()} == {fairq.State.INFLIGHT}


def test_release_over_the_wire_gives_the_lease_back_as_a_local_queue_does(server, client, clock,
                                                                          tmp_path) -> None:
    local = local_twin(server, tmp_path)
    runs = []
    for q in (client, local):
        q.enqueue_many([("a", 1, "A"), ("b", 2, "B")])
        a, b = q.claim_many(2, owner="w", lease_seconds=30)
        released = [q.release(a), q.settle(b, "release")]
        released += q.settle_many([(q.claim(owner="w", lease_seconds=30), "release")])
        runs.append((released, q.claim(owner="w", lease_seconds=30)))
    assert runs[0] == runs[1]
    released, again = runs[0]
    # Ready at once, and the released claims do not count: the next claim is attempt 1.
    assert {(r.state, r.next_at, r.attempts) for r in released} == {(fairq.State.READY, clock.now, 0)}
    assert (again.attempts, again.lifetime_attempts, again.generation) == (1, 2, 2)
    assert client.events() == local.events() and client.audit() == local.audit()
    local.close()


def test_the_release_outcome_on_the_wire(server, client, clock) -> None:
    client.enqueue_many([("a", 1, "A"), ("b", 2, "B"), ("c", 3, "C")])
    a, b, c = (to_json(lease) for lease in client.claim_many(3, lease_seconds=30))
    answer = raw(server, "POST", "/v1/settle", {"lease": a, "outcome": "release"})
    assert (answer.status, answer.json) == (200, {"attempts": 0, "event_id": "a", "next_at": clock.now,
                                                  "state": "ready"})
    answer = raw(server, "POST", "/v1/settle_many", {"items": [{"lease": b, "outcome": "release"},
                                                               {"lease": c, "outcome": "ack"}]})
    assert answer.status == 200 and [(r["state"], r["attempts"]) for r in answer.json["results"]] == [
        ("ready", 0), ("acked", 1)]
    refused = raw(server, "POST", "/v1/settle", {"lease": a, "outcome": "release", "delay": 5})
    assert (refused.status, refused.json["field"]) == (400, "delay")  # a release takes no delay (nor reason)


def test_a_client_leases_for_its_own_lease_seconds_and_reopens_with_its_settings(server, clock) -> None:
    client = fairq.Client(server.url, token=TOKEN, timeout=10, lease_seconds=120)
    client.enqueue("a", {})
    lease = client.claim()  # the server's queue leases for 5 s when a request names no length
    assert lease.lease_until == clock.now + 120
    clock.advance(100)
    assert client.extend(lease).lease_until == clock.now + 120
    again = fairq.Client(client.url, **client.settings())
    assert (again.lease_seconds, again.timeout) == (120, 10) and again.ack(lease).state is fairq.State.ACKED
    with pytest.raises(fairq.InvalidInput) as caught:
        fairq.Client(server.url, token=TOKEN, lease_seconds=0)
    assert caught.value.field == "lease_seconds"


def test_a_stale_settle_is_409_and_changes_nothing(server, client, make_queue, clock) -> None:
    client.enqueue("a", {}, flow="F")
    old = client.claim(owner="A", lease_seconds=1)
    clock.advance(1)  # the lease ends: A's event is claimed again
    new = client.claim(owner="B", lease_seconds=30)
    assert (new.event_id, new.generation) == ("a", 2)
    before = make_queue().get("a")
    answer = raw(server, "POST", "/v1/settle", {"lease": {"event_id": "a", "generation": 1}, "outcome": "ack"})
    assert answer.status == 409
    assert answer.json["error"] == "stale_lease"
    assert (answer.json["event_id"], answer.json["generation"]) == ("a", 1)
    with pytest.raises(fairq.StaleLease):
        client.ack(old)
    with pytest.raises(fairq.LeaseLost):
        client.extend(old)
    assert make_queue().get("a") == before  # still B's, at generation 2, nothing moved
    assert client.ack(new).state is fairq.State.ACKED


def test_an_expired_lease_is_409_lease_expired(server, client, make_queue, clock) -> None:
    client.enqueue("a", {}, flow="F")
    lease = client.claim(owner="A", lease_seconds=1)
    clock.advance(0.999)
    assert client.extend(lease, 1).lease_until == clock.now + 1  # still held a millisecond before its end
    clock.advance(1)
    answer = raw(server, "POST", "/v1/settle", {"lease": to_json(lease), "outcome": "ack"})
    assert (answer.status, answer.json["error"]) == (409, "lease_expired")
    with pytest.raises(fairq.LeaseExpired):
        client.ack(lease)
    assert make_queue().get("a").state is fairq.State.INFLIGHT


def test_extend_renews_the_lease_it_is_given(client) -> None:
    client.enqueue("a", {})
    lease = client.claim(lease_seconds=1)
    longer = client.extend(lease, 60)
    assert longer.generation == lease.generation and longer.lease_until > lease.lease_until + 50
    assert client.ack(longer).state is fairq.State.ACKED


def test_redrive_over_the_wire_and_a_refused_redrive_is_409(server, client, make_queue) -> None:
    client.enqueue("a", {}, flow="F")
    client.fail(client.claim(), "bad data")
    answer = raw(server, "POST", "/v1/redrive", {"event_id": "a", "expected_generation": 7, "reason": "fixed"})
    assert (answer.status, answer.json["error"], answer.json["event_id"]) == (409, "redrive_refused", "a")
    with pytest.raises(fairq.RedriveRefused):
        client.redrive("a", expected_generation=7, reason="fixed")
    assert client.redrive("a", expected_generation=1, reason="fixed", actor="ops") == 2
    info = make_queue().get("a")
    assert (info.state, info.generation, info.attempts) == (fairq.State.READY, 2, 0)
    [row] = [r for r in client.audit("a") if r.action == "redrive"]
    assert (row.actor, row.reason, row.detail["replaced_reason"]) == ("ops", "fixed", "bad data")


def test_metrics_answers_the_prometheus_text_of_the_servers_queue(server, client, make_queue) -> None:
    client.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("b1", {}, "B")])
    client.ack(client.claim())
    answer = raw(server, "GET", "/metrics?top=1")
    assert answer.status == 200 and answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    types, samples = parse(answer.text)
    assert types["fairq_acked_total"] == "counter"
    values = {(name, tuple(labels.items())): value for name, labels, value in samples}
    assert values["fairq_events", (("state", "ready"),)] == 2 and values["fairq_acked_total", ()] == 1
    assert [labels["flow"] for name, labels, _ in samples if name == "fairq_flow_backlog"] == ["A"]

    def timeless(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("fairq_oldest_ready_age_seconds ")]

    assert timeless(answer.text) == timeless(exposition(make_queue().stats(top=1)))
    assert (raw(server, "GET", "/metrics?top=x").json["field"], raw(server, "POST", "/metrics", {}).status) == ("top", 405)


def test_get_answers_404_for_an_unknown_event_and_client_returns_none(server, client) -> None:
    answer = raw(server, "GET", "/v1/events/nope")
    assert (answer.status, answer.json["error"]) == (404, "unknown_event")
    assert client.get("nope") is None


def test_an_event_id_with_slashes_and_unicode_round_trips_in_the_path(client) -> None:
    event_id = "tenant/42 ü?#%"
    client.enqueue(event_id, {"ok": True})
    info = client.get(event_id)
    assert isinstance(info, fairq.EventInfo) and info.event_id == event_id and info.body == {"ok": True}


def test_events_audit_and_stats_read_what_the_queue_reads(client, make_queue) -> None:
    client.enqueue_many([("a", 1, "F"), ("b", 2, "F"), ("c", 3, "G")])
    client.fail(client.claim(), "broken")
    local = make_queue()
    assert client.events() == local.events()
    assert client.events(state=fairq.State.QUARANTINED) == local.events(state="quarantined")
    assert [e.event_id for e in client.events(flow="F", limit=1)] == ["a"]
    assert client.audit() == local.audit() and client.audit("a", limit=1) == local.audit("a", limit=1)
    remote, here = client.stats(top=1), local.stats()
    assert remote.counts == here.counts == {"ready": 2, "inflight": 0, "acked": 0, "quarantined": 1, "discarded": 0}
    assert remote.totals == here.totals and remote.flows == here.flows
    assert remote.claim_lag_buckets[-1][0] == float("inf")
    assert remote.top_flows == (("F", 2),)


def test_set_weight_changes_the_rotation_as_on_a_local_queue(client, make_queue, tmp_path) -> None:
    items = [(f"{flow}{i}", i, flow) for i in range(1, 5) for flow in "AB"]
    client.set_weight("A", 3)
    client.enqueue_many(items)
    remote = []
    while (lease := client.claim()) is not None:
        remote.append(lease.event_id)
        client.ack(lease)
    with fairq.Queue(tmp_path / "local.db") as local:
        local.set_weight("A", 3)
        local.enqueue_many(items, now=0)
        order = []
        while (lease := local.claim(now=0)) is not None:
            order.append(lease.event_id)
            local.ack(lease, now=0)
    assert remote == order and remote[:4] == ["A1", "B1", "A2", "A3"]


def test_set_weight_refuses_a_bad_weight_naming_the_field(server, client) -> None:
    answer = raw(server, "POST", "/v1/set_weight", {"flow": "A", "weight": 0})
    assert (answer.status, answer.json["error"], answer.json["field"]) == (400, "invalid_input", "weight")
    assert raw(server, "POST", "/v1/set_weight", {"flow": "A", "weight": 2}).json == {"flow": "A", "weight": 2}


def test_refusals_name_the_same_field_as_a_local_queue(client) -> None:
    cases = [
        (lambda: client.enqueue(5, {}), "event_id"),
        (lambda: client.enqueue("a", {}, delay=-1), "delay"),
        (lambda: client.claim_many(0), "n"),
        (lambda: client.claim(lease_seconds=0), "lease_seconds"),
        (lambda: client.events(state="lost"), "state"),
        (lambda: client.events(limit=True), "limit"),
        (lambda: client.settle(LeaseRef("a", 0), "ack"), "lease.generation"),
        (lambda: client.settle_many([(LeaseRef("a", 1), "maybe")]), "items[0].outcome"),
        (lambda: client.redrive("a", expected_generation=1, reason="  "), "reason"),
    ]
    for call, field in cases:
        with pytest.raises(fairq.InvalidInput) as caught:
            call()
        assert caught.value.field == field


def test_now_effect_and_conn_cannot_cross_the_wire(client, tmp_path) -> None:
    app = sqlite3.connect(tmp_path / "app.db")
    client.enqueue("a", {})
    lease = client.claim()
    for call, field in [(lambda: client.enqueue("b", {}, now=1.0), "now"),
                        (lambda: client.claim(now=1.0), "now"),
                        (lambda: client.ack(lease, effect=lambda conn: None), "effect"),
                        (lambda: client.stats(now=1.0), "now"),
                        (lambda: client.enqueue_many([("b", {})], conn=app), "conn")]:
        with pytest.raises(fairq.InvalidInput) as caught:
            call()
        assert caught.value.field == field
    app.close()
    assert client.get("b") is None and client.ack(lease).state is fairq.State.ACKED


# Queue methods the server does not offer, by the verb table; docs/http.md
# ("What a Client does not do") says why for each.
NOT_SERVED = {verb.name for verb in VERBS.values() if Place.CLIENT in verb.absent}


def shape(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def public_methods(cls: type) -> list[str]:
    # Inherited verbs count too (Queue's reads and maintenance live in base classes).
    return [name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))]


def test_the_client_has_every_served_queue_verb_with_the_same_parameters() -> None:
    verbs = public_methods(fairq.Queue)
    assert NOT_SERVED <= set(verbs) and not any(hasattr(fairq.Client, name) for name in NOT_SERVED)
    assert {"enqueue", "claim_many", "settle_many", "extend", "redrive", "stats", "tick", "settings"} <= set(verbs)
    for name in set(verbs) - NOT_SERVED:
        assert shape(getattr(fairq.Client, name)) == shape(getattr(fairq.Queue, name)), name


def test_the_docs_list_everything_a_client_does_not_do(client, q) -> None:
    doc = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")
    section = doc.split("## What a Client does not do\n")[1].split("\n## ")[0]
    rows = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `")]
    assert {name for name in NOT_SERVED if any(row.startswith(f"| `{name}(") for row in rows)} == NOT_SERVED
    for refused in ("now=", "effect=", "conn="):  # refused by test_now_effect_and_conn_cannot_cross_the_wire
        assert any(f"{refused}" in row for row in rows), refused
    settings_only_on_a_queue = {name for name in vars(q) if not name.startswith("_")} - set(dir(client))
    assert settings_only_on_a_queue == {"path", "max_body_bytes", "max_clock_skew"}
    assert all(f"`{name}`" in rows[-1] for name in settings_only_on_a_queue)


def test_client_schedules_has_every_method_of_queue_schedules_with_the_same_parameters(client, q) -> None:
    local, remote = type(q.schedules), type(client.schedules)
    assert public_methods(local) == public_methods(remote)
    assert {"add", "get", "list", "remove", "pause", "resume"} <= set(public_methods(local))
    for name in public_methods(local):
        assert shape(getattr(remote, name)) == shape(getattr(local, name)), name


def test_a_locked_database_is_503_busy_with_retry_after(make_queue, db_path) -> None:
    queue = make_queue(busy_timeout=0.1)
    blocker = sqlite3.connect(db_path, isolation_level=None)
    with running(queue) as server:
        blocker.execute("BEGIN IMMEDIATE")
        try:
            answer = raw(server, "POST", "/v1/claim", {})
            with pytest.raises(fairq.Busy):
                fairq.Client(server.url, token=TOKEN).claim()
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert (answer.status, answer.json["error"], answer.headers["Retry-After"]) == (503, "busy", "1")


def test_an_unexpected_error_answers_500_without_details_and_logs_the_traceback(server, client, caplog) -> None:
    def broken(**kw):
        raise RuntimeError("secret detail /etc/passwd")

    server.queue.stats = broken
    with caplog.at_level(logging.ERROR, logger="fairq"):
        answer = raw(server, "GET", "/v1/stats")
        with pytest.raises(fairq.RemoteError) as caught:
            client.stats()
    assert answer.status == 500 and answer.json == {"error": "internal", "message": "internal error"}
    assert (caught.value.status, caught.value.code) == (500, "internal")
    assert "secret" not in answer.text and "Traceback" not in answer.text
    assert any("secret detail" in (r.exc_text or "") for r in caplog.records)


def test_an_unreachable_server_raises_unavailable(server) -> None:
    url = server.url
    server.shutdown()
    server.server_close()
    with pytest.raises(fairq.Unavailable) as caught:
        fairq.Client(url, token=TOKEN, timeout=5).claim()
    assert caught.value.url == url and "may or may not" in str(caught.value)


def test_every_endpoint_and_error_code_is_documented() -> None:
    doc = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")
    for r in ROUTES:
        path = "/" + "/".join(r.segments)
        assert f"| `{r.method} {path}" in doc, path  # a row in the endpoint table
    for code, status in STATUS.items():
        assert f"| {status} | `{code}` |" in doc, code


def test_an_answer_that_is_not_the_expected_value_raises_remote_error() -> None:
    lease = fairq.Lease("a", None, 1, {}, 1, 1, 1, None, 5.0)
    assert from_json(fairq.Lease, {**to_json(lease), "added_later": 1}) == lease  # a newer server's extra key
    bad_answers = [(fairq.Lease, []), (fairq.Lease, {"event_id": "a"}),
                   (fairq.Settled, {"event_id": "a", "state": "gone", "next_at": None, "attempts": 1})]
    for cls, data in bad_answers:
        with pytest.raises(fairq.RemoteError) as caught:
            from_json(cls, data)
        assert caught.value.code == "bad_response"


def test_stats_over_http_keep_the_local_order_of_states_and_totals(client) -> None:
    """JSON objects arrive sorted by key; the Client puts counts and totals back in fairq's order."""
    client.enqueue("o1", {"n": 1}, flow="a")
    stats = client.stats()
    assert list(stats.counts) == [s.value for s in fairq.State]
    assert list(stats.totals)[:len(fairq.types.TOTALS)] == list(fairq.types.TOTALS)


def test_a_full_disk_on_the_server_is_507_disk_full_and_writes_nothing(tmp_path, caplog) -> None:
    q = fairq.Queue(tmp_path / "q.db")
    q._store.db.conn.execute("PRAGMA max_page_count = 40")  # the file may not grow past 40 pages
    with running(q) as server:
        client = fairq.Client(server.url, token=TOKEN, timeout=10)
        stored = 0
        with caplog.at_level(logging.ERROR, logger="fairq"):
            with pytest.raises(fairq.DiskFull, match="the server's database is full") as info:
                for stored in range(1000):
                    client.enqueue(f"e{stored}", {"pad": "x" * 3000})
        assert str(tmp_path) not in str(info.value)  # the server's file is its own business...
        assert any(str(tmp_path) in r.getMessage() and "/v1/enqueue" in r.getMessage()
                   for r in caplog.records)  # ...said in its log
        answer = raw(server, "POST", "/v1/enqueue", {"event_id": "more", "body": {"pad": "x" * 3000}})
        assert answer.status == 507 and answer.json["error"] == "disk_full"
        assert client.get(f"e{stored}") is None and client.get("more") is None
        assert client.stats().counts["ready"] == stored
    q.close()


@pytest.mark.parametrize("failure", [fairq.DiskFull, fairq.ReadOnly, fairq.Corrupt, fairq.StoreError])
def test_a_store_failure_crosses_the_wire_as_its_own_type_without_the_servers_path(failure) -> None:
    from fairq.http.wire import error_code, error_from_json, queue_error_json
    sent = queue_error_json(failure("/srv/secret/q.db", "/srv/secret/q.db: it failed"))
    assert "/srv/secret" not in sent["message"]
    got = error_from_json(STATUS[error_code(failure("x"))], sent, "http://127.0.0.1:1")
    assert type(got) is failure and got.path == "http://127.0.0.1:1"
