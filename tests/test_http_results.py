"""Results over HTTP: GET /v1/result and the long poll GET /v1/wait, and fairq.Client
(and AsyncClient) answering and refusing as a local Queue does."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import fairq
import fairq.aio
from helpers import TOKEN, raw


def test_an_ack_with_a_result_over_the_wire_and_get_result(server, client, make_queue) -> None:
    client.enqueue_many([("a", {}), ("b", {}), ("c", {})])
    a, b, c = client.claim_many(3)
    client.ack(a, result={"total": 7})
    client.settle_many([(b, "ack", None, None, [1, 2])])
    assert client.result("a") == {"total": 7} == make_queue().result("a")
    assert client.result("b") == [1, 2]
    answer = raw(server, "GET", "/v1/result/a")
    assert answer.status == 200 and answer.json == {"event_id": "a", "result": {"total": 7}}
    refused = raw(server, "GET", "/v1/result/c")
    assert refused.status == 409
    assert refused.json["error"] == "result_not_ready" and refused.json["state"] == "inflight"
    with pytest.raises(fairq.ResultNotReady) as caught:
        client.result("c")
    assert caught.value.state is fairq.State.INFLIGHT and caught.value.event_id == "c"
    assert raw(server, "GET", "/v1/result/nope").status == 404
    with pytest.raises(fairq.ResultNotReady) as caught:
        client.result("nope")
    assert caught.value.state is None
    with pytest.raises(fairq.InvalidInput) as bad:
        client.ack(c, result={1, 2})
    assert bad.value.field == "result"
    assert make_queue().get("c").state is fairq.State.INFLIGHT


def test_a_quarantined_event_is_409_with_its_reason(server, client) -> None:
    client.enqueue("a", {})
    client.fail(client.claim(), "bad sku")
    answer = raw(server, "GET", "/v1/wait/a?timeout=5")
    assert answer.status == 409 and answer.json["state"] == "quarantined" and answer.json["reason"] == "bad sku"
    with pytest.raises(fairq.ResultNotReady) as caught:
        client.wait("a", timeout=5)
    assert caught.value.state is fairq.State.QUARANTINED and caught.value.reason == "bad sku"


def test_the_long_poll_answers_not_done_at_its_timeout_and_a_client_waits_for_the_ack(server, client) -> None:
    client.enqueue("a", {})
    lease = client.claim()
    answer = raw(server, "GET", "/v1/wait/a?timeout=0.05")
    assert answer.status == 200 and answer.json == {"event_id": "a", "done": False, "state": "inflight"}
    assert raw(server, "GET", "/v1/wait/a?timeout=-1").status == 400
    with pytest.raises(TimeoutError):
        client.wait("a", timeout=0.1)
    timer = threading.Timer(0.1, lambda: client.ack(lease, result="done"))
    timer.start()
    assert client.wait("a", timeout=10) == "done"
    timer.join()


def test_an_async_client_reads_and_waits_for_results(server) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncClient(server.url, token=TOKEN) as c:
            await c.enqueue("a", {})
            lease = await c.claim()
            with pytest.raises(TimeoutError):
                await c.wait("a", timeout=0.05)
            await c.ack(lease, result=3)
            assert await c.result("a") == 3
            assert await c.wait("a", timeout=1) == 3

    asyncio.run(main())

