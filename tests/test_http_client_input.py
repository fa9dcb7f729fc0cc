"""Input a Queue refuses, a Client refuses the same way, before sending anything:
a lone surrogate in any string a Client verb takes raises the InvalidInput the
Queue raises for it, naming the same field (never a UnicodeEncodeError). The
Client here points at a port nothing listens on: had it sent anything, the
call would raise Unavailable instead."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Callable
from typing import Any

import pytest

import fairq
from fairq.aio import AsyncClient

S = "\ud800"  # a lone surrogate: a str Python holds, but no UTF-8 encodes

Call = Callable[[Any, fairq.Lease], Any]

CASES: dict[str, Call] = {
    "enqueue event_id": lambda t, _: t.enqueue("e" + S, 1),
    "enqueue body": lambda t, _: t.enqueue("e", "b" + S),
    "enqueue body key": lambda t, _: t.enqueue("e", {"k" + S: 1}),
    "enqueue nested body": lambda t, _: t.enqueue("e", {"a": [1, {"b": S}]}),
    "enqueue flow": lambda t, _: t.enqueue("e", 1, flow="f" + S),
    "enqueue_many event_id": lambda t, _: t.enqueue_many([("a", 1), ("e" + S, 1)]),
    "enqueue_many body": lambda t, _: t.enqueue_many([("a", 1), ("e", {"x": S})]),
    "enqueue_many flow": lambda t, _: t.enqueue_many([("e", 1, "f" + S)]),
    "enqueue_many dict flow": lambda t, _: t.enqueue_many([{"event_id": "e", "body": 1, "flow": "f" + S}]),
    "claim owner": lambda t, _: t.claim(owner="o" + S),
    "claim_many owner": lambda t, _: t.claim_many(2, owner="o" + S),
    "settle outcome": lambda t, lease: t.settle(lease, "ack" + S),
    "settle reason": lambda t, lease: t.settle(lease, "retry", reason="r" + S),
    "settle lease event_id": lambda t, lease: t.settle(dataclasses.replace(lease, event_id="e" + S), "ack"),
    "retry reason": lambda t, lease: t.retry(lease, "r" + S),
    "fail reason": lambda t, lease: t.fail(lease, "r" + S),
    "settle_many reason": lambda t, lease: t.settle_many([(lease, "retry", "r" + S)]),
    "settle_many outcome": lambda t, lease: t.settle_many([(lease, "ack" + S)]),
    "extend lease event_id": lambda t, lease: t.extend(dataclasses.replace(lease, event_id="e" + S)),
    "redrive event_id": lambda t, _: t.redrive("e" + S, expected_generation=1, reason="r"),
    "redrive reason": lambda t, _: t.redrive("e", expected_generation=1, reason="r" + S),
    "redrive actor": lambda t, _: t.redrive("e", expected_generation=1, reason="r", actor="a" + S),
    "redrive_many event_id": lambda t, _: t.redrive_many([("e" + S, 1)], reason="r"),
    "redrive_many reason": lambda t, _: t.redrive_many([("e", 1)], reason="r" + S),
    "redrive_many actor": lambda t, _: t.redrive_many([("e", 1)], reason="r", actor="a" + S),
    "set_weight flow": lambda t, _: t.set_weight("f" + S, 2),
    "get event_id": lambda t, _: t.get("e" + S),
    "why_blocked flow": lambda t, _: t.why_blocked("f" + S),
    "events state": lambda t, _: t.events(state="ready" + S),
    "events flow": lambda t, _: t.events(flow="f" + S),
    "events after": lambda t, _: t.events(after="e" + S),
    "audit event_id": lambda t, _: t.audit("e" + S),
    "flows after": lambda t, _: t.flows(after="f" + S),
    "schedules.add name": lambda t, _: t.schedules.add("n" + S, every=60),
    "schedules.add cron": lambda t, _: t.schedules.add("n", cron="0 3 * * *" + S),
    "schedules.add tz": lambda t, _: t.schedules.add("n", cron="0 3 * * *", tz="UTC" + S),
    "schedules.add body": lambda t, _: t.schedules.add("n", every=60, body={"x": S}),
    "schedules.add flow": lambda t, _: t.schedules.add("n", every=60, flow="f" + S),
    "schedules.add misfire": lambda t, _: t.schedules.add("n", every=60, misfire="skip" + S),
    "schedules.get name": lambda t, _: t.schedules.get("n" + S),
    "schedules.remove name": lambda t, _: t.schedules.remove("n" + S),
    "schedules.pause name": lambda t, _: t.schedules.pause("n" + S),
    "schedules.resume name": lambda t, _: t.schedules.resume("n" + S),
    "schedules.misfires name": lambda t, _: t.schedules.misfires("n" + S),
}


@pytest.fixture
def nowhere() -> str:
    """The URL of a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def lease(make_queue) -> fairq.Lease:
    q = make_queue()
    q.enqueue("held", 1)
    found = q.claim(owner="w")
    assert found is not None
    return found


def _refusal(call: Call, target: Any, lease: fairq.Lease) -> fairq.InvalidInput:
    with pytest.raises(fairq.FairqError) as refused:
        call(target, lease)
    assert type(refused.value) is fairq.InvalidInput, refused.value
    return refused.value


@pytest.mark.parametrize("case", CASES)
def test_a_client_refuses_a_lone_surrogate_as_the_queue_does_before_sending(case, make_queue, lease, nowhere) -> None:
    expected = _refusal(CASES[case], make_queue(), lease)
    got = _refusal(CASES[case], fairq.Client(nowhere, token="t", timeout=5), lease)
    assert got.field == expected.field


@pytest.mark.parametrize("case", ["enqueue flow", "enqueue body", "settle reason", "set_weight flow",
                                  "events after", "redrive_many event_id"])
def test_an_async_client_refuses_it_the_same_way(case, make_queue, lease, nowhere) -> None:
    expected = _refusal(CASES[case], make_queue(), lease)

    async def main() -> fairq.InvalidInput:
        async with AsyncClient(nowhere, token="t", timeout=5) as client:
            with pytest.raises(fairq.FairqError) as refused:
                await CASES[case](client, lease)
            assert type(refused.value) is fairq.InvalidInput, refused.value
            return refused.value

    assert asyncio.run(main()).field == expected.field


@pytest.mark.parametrize("token", ["t" + S, "tök", "two words", ""])
def test_a_token_the_server_could_not_hold_is_refused_naming_token(token, nowhere) -> None:
    with pytest.raises(fairq.InvalidInput) as refused:
        fairq.Client(nowhere, token=token)
    assert refused.value.field == "token"
