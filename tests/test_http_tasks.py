"""Kinds and per-event policy over HTTP: POST /v1/enqueue and enqueue_many
take kind, max_attempts, timeout and backoff; a claimed lease and an event
carry them back; GET /v1/events takes kind; fairq.Client and AsyncClient
pass them on."""

from __future__ import annotations

import asyncio

import pytest

import fairq
import fairq.aio
from helpers import TOKEN, raw


def test_enqueue_takes_a_kind_and_a_policy_and_a_lease_carries_them_back(server, client, clock) -> None:
    answer = raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {}, "kind": "email", "max_attempts": 2,
                                                   "timeout": 1.5, "backoff": {"base": 3, "jitter": False}})
    assert answer.status == 201
    client.enqueue("b", {}, kind="sms", backoff=fairq.Backoff(base=9, jitter=False))
    client.enqueue_many([{"event_id": "c", "body": {}, "kind": "email", "backoff": fairq.Backoff(base=4)}])
    info = client.get("a")
    assert (info.kind, info.max_attempts, info.timeout) == ("email", 2, 1.5)
    leases = {lease.event_id: lease for lease in client.claim_many(3)}
    assert (leases["a"].kind, leases["a"].timeout) == ("email", 1.5)
    assert raw(server, "GET", "/v1/events?kind=email").json["events"][1]["event_id"] == "c"
    assert [e.event_id for e in client.events(kind="email")] == ["a", "c"]
    assert client.retry(leases["b"], "later").next_at == clock.now + 9  # its own backoff (the queue's: 2)
    assert client.retry(leases["a"], "later").next_at == clock.now + 3


def test_a_bad_kind_or_another_kind_for_a_stored_id_is_refused_over_http(server, client, make_queue) -> None:
    client.enqueue("a", {}, kind="email")
    answer = raw(server, "POST", "/v1/enqueue", {"event_id": "a", "body": {}, "kind": "sms"})
    assert (answer.status, answer.json["field"]) == (409, "kind")
    with pytest.raises(fairq.InvalidInput) as caught:
        client.enqueue("b", {}, kind="")
    assert caught.value.field == "kind"
    with pytest.raises(fairq.InvalidInput) as caught:
        client.enqueue("b", {}, backoff={"base": -1})
    assert caught.value.field == "backoff.base"
    assert [e.event_id for e in make_queue().events()] == ["a"]


def test_an_async_client_enqueues_with_a_kind(server) -> None:
    async def main() -> list[str | None]:
        async with fairq.aio.AsyncClient(server.url, token=TOKEN, timeout=10) as c:
            await c.enqueue("a", {}, kind="email", timeout=2)
            return [e.kind for e in await c.events(kind="email")]

    assert asyncio.run(main()) == ["email"]
