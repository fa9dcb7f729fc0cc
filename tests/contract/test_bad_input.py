"""Every refusal is an InvalidInput naming the field, and nothing is written."""

from __future__ import annotations

import pytest

import fairq

NAN = float("nan")
INF = float("inf")


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


DEEP = nested(150)


ENQUEUE_CASES = [
    ({"event_id": ""}, "event_id"),
    ({"event_id": 17}, "event_id"),
    ({"event_id": b"bytes"}, "event_id"),  # None is allowed: fairq makes an id
    ({"event_id": "x" * 256}, "event_id"),
    ({"event_id": "tab\there"}, "event_id"),
    ({"event_id": "nul\x00"}, "event_id"),
    ({"event_id": "del\x7f"}, "event_id"),
    ({"event_id": "lone\ud800"}, "event_id"),
    ({"event_id": "c1\x85control"}, "event_id"),
    ({"flow": ""}, "flow"),
    ({"flow": 3}, "flow"),
    ({"flow": "new\nline"}, "flow"),
    ({"flow": "f" * 300}, "flow"),
    ({"body": NAN}, "body"),
    ({"body": {"a": INF}}, "body.a"),
    ({"body": {"a": [1, -INF]}}, "body.a[1]"),
    ({"body": {1: "int key"}}, "body"),
    ({"body": {"a": {None: 1}}}, "body.a"),
    ({"body": (1, 2)}, "body"),
    ({"body": {1, 2}}, "body"),
    ({"body": b"bytes"}, "body"),
    ({"body": object()}, "body"),
    ({"body": {"s": "lone \udc00"}}, "body"),
    ({"body": "x" * 300}, "body"),  # over the 256-byte limit set below
    ({"body": "é" * 200}, "body"),  # 200 characters, 400 bytes: over the limit
    ({"body": DEEP}, "body" + "[0]" * 100),
    ({"delay": -1}, "delay"),
    ({"delay": -0.5}, "delay"),
    ({"delay": NAN}, "delay"),
    ({"delay": "5"}, "delay"),
    ({"delay": True}, "delay"),
    ({"now": -0.5}, "now"),
    ({"now": INF}, "now"),
    ({"now": 1e300}, "now"),
    ({"now": 10**400}, "now"),
    ({"delay": 1e16}, "delay"),
]


@pytest.mark.parametrize("override, field", ENQUEUE_CASES)
def test_a_bad_enqueue_names_the_field_and_writes_nothing(make_queue, store, target, override, field) -> None:
    q = make_queue(max_body_bytes=256)
    q.enqueue("existing", {}, flow="F", now=1)
    before = store.snapshot(target)
    args = {"event_id": "e1", "body": {"ok": True}, "flow": "F", "delay": 0, "now": 1} | override
    with pytest.raises(fairq.InvalidInput) as info:
        q.enqueue(args.pop("event_id"), args.pop("body"), **args)
    assert info.value.field == field, info.value
    assert isinstance(info.value, ValueError)
    assert field in str(info.value)
    assert store.snapshot(target) == before


@pytest.mark.parametrize("items, field", [
    ([("ok", {}), ("", {})], "items[1].event_id"),
    ([("ok", {}), ("x", {"a": NAN})], "items[1].body.a"),
    ([{"event_id": "x", "body": {}, "colour": "red"}], "items[0].colour"),
    ([{"body": {}}], "items[0].event_id"),
    ([{"event_id": "x"}], "items[0].body"),
    ([("x",)], "items[0]"),
    (["x"], "items[0]"),
    ([{"event_id": "x", "body": {}, "delay": -2}], "items[0].delay"),
    ("not a list", "items"),
])
def test_a_bad_batch_names_the_item_and_writes_nothing(q, store, target, items, field) -> None:
    q.enqueue("existing", {}, now=1)
    before = store.snapshot(target)
    with pytest.raises(fairq.InvalidInput) as info:
        q.enqueue_many(items, now=1)
    assert info.value.field == field
    assert store.snapshot(target) == before


def test_bad_outcomes_reasons_and_delays_are_refused(q: fairq.Queue, store, target) -> None:
    q.enqueue("x", {}, now=0)
    lease = q.claim(now=0)
    before = store.snapshot(target)
    cases = [
        (lambda: q.settle(lease, "done", now=0), "outcome"),
        (lambda: q.settle(lease, None, now=0), "outcome"),
        (lambda: q.fail(lease, "", now=0), "reason"),
        (lambda: q.fail(lease, None, now=0), "reason"),
        (lambda: q.settle(lease, "fail", now=0), "reason"),
        (lambda: q.retry(lease, "x" * 5000, now=0), "reason"),
        (lambda: q.retry(lease, 42, now=0), "reason"),
        (lambda: q.retry(lease, "r", delay=-1, now=0), "delay"),
        (lambda: q.retry(lease, "r", delay=INF, now=0), "delay"),
        (lambda: q.ack(lease, reason="why", now=0), "reason"),
        (lambda: q.ack(lease, delay=3, now=0), "delay"),
        (lambda: q.settle("not a lease", "ack", now=0), "lease"),
        (lambda: q.settle(lease, "ack", effect="not callable", now=0), "effect"),
        (lambda: q.settle_many([(lease,)], now=0), "items[0]"),
        (lambda: q.settle_many([(lease, "nope")], now=0), "items[0].outcome"),
        (lambda: q.extend(lease, -5, now=0), "seconds"),
        (lambda: q.extend(lease, 0, now=0), "seconds"),
        (lambda: q.extend(lease, 0.0004, now=0), "seconds"),
        (lambda: q.claim(lease_seconds=1e20, now=0), "lease_seconds"),
        (lambda: q.claim(owner="", now=0), "owner"),
        (lambda: q.claim(lease_seconds=0, now=0), "lease_seconds"),
        (lambda: q.claim_many(0, now=0), "n"),
        (lambda: q.claim_many(True, now=0), "n"),
        (lambda: q.redrive("x", expected_generation=-1, reason="r", now=0), "expected_generation"),
        (lambda: q.redrive("x", expected_generation=1, reason="r", actor="", now=0), "actor"),
        (lambda: q.set_weight("F", 0), "weight"),
        (lambda: q.set_weight("F", 1001), "weight"),
        (lambda: q.set_weight("F", 1.5), "weight"),
        (lambda: q.set_weight("", 2), "flow"),
        (lambda: q.events(state="sleeping"), "state"),
        (lambda: q.events(limit=0), "limit"),
    ]
    for call, field in cases:
        with pytest.raises(fairq.InvalidInput) as info:
            call()
        assert info.value.field == field, (field, info.value)
    assert store.snapshot(target) == before


@pytest.mark.parametrize("kwargs, field", [
    ({"lease_seconds": 0}, "lease_seconds"),
    ({"lease_seconds": 0.0004}, "lease_seconds"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"synchronous": "off"}, "synchronous"),
    ({"backoff": "fast"}, "backoff"),
    ({"max_body_bytes": 0}, "max_body_bytes"),
])
def test_bad_queue_settings_are_refused(store, target, kwargs, field) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        store.open(target, **kwargs)
    assert info.value.field == field


@pytest.mark.parametrize("kwargs, field", [
    ({"base": -1}, "backoff.base"),
    ({"factor": 0.5}, "backoff.factor"),
    ({"cap": NAN}, "backoff.cap"),
    ({"cap": 1e300}, "backoff.cap"),
    ({"base": 10**400}, "backoff.base"),
    ({"jitter": "yes"}, "backoff.jitter"),
])
def test_bad_backoff_settings_are_refused(kwargs, field) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Backoff(**kwargs)
    assert info.value.field == field
