"""A handler's return value is its event's result: fairq.Worker and fairq.aio.AsyncWorker
store it with the ack; a value that is not JSON, or too big, quarantines the event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import fairq
import fairq.aio


def returns(job: fairq.Job) -> Any:
    kind = job.body["kind"]
    if kind == "value":
        return {"doubled": job.body["n"] * 2}
    if kind == "set":
        return {1, 2}
    if kind == "big":
        return "x" * 400
    if kind == "retry":
        return fairq.Retry("later", delay=30)
    if kind == "fail":
        return fairq.Fail("bad input")
    return None


BODIES = [("value", {"kind": "value", "n": 21}), ("none", {"kind": "none"}), ("set", {"kind": "set"}),
          ("big", {"kind": "big"}), ("retry", {"kind": "retry"}), ("fail", {"kind": "fail"})]


def check(q: fairq.Queue, handled: list[fairq.Handled]) -> None:
    assert q.result("value") == {"doubled": 42}
    assert q.result("none") is None
    for event_id, why in (("set", "bad_result: "), ("big", "bad_result: ")):
        info = q.get(event_id)
        assert info.state is fairq.State.QUARANTINED and info.reason.startswith(why), info.reason
        with pytest.raises(fairq.ResultNotReady) as caught:
            q.result(event_id)
        assert caught.value.reason == info.reason
    assert "402 bytes" in q.get("big").reason
    assert q.get("retry").state is fairq.State.READY and q.get("retry").reason == "later"
    assert q.get("fail").state is fairq.State.QUARANTINED and q.get("fail").reason == "bad input"
    assert {h.event_id: h.outcome for h in handled} == {
        "value": fairq.ACK, "none": fairq.ACK, "set": fairq.FAIL, "big": fairq.FAIL, "retry": fairq.RETRY,
        "fail": fairq.FAIL}


def test_a_workers_handler_returns_its_events_result(make_queue) -> None:
    q = make_queue(max_body_bytes=256)
    q.enqueue_many(BODIES)
    handled = fairq.Worker(q, returns, batch=len(BODIES)).step()
    check(q, handled)


def test_an_async_workers_handler_returns_its_events_result(make_queue) -> None:
    q = make_queue(max_body_bytes=256)
    q.enqueue_many(BODIES)

    async def handler(job: fairq.Job) -> Any:
        await asyncio.sleep(0)
        return returns(job)

    async def main() -> list[fairq.Handled]:
        async with fairq.aio.AsyncQueue(q) as aq:
            handled: list[fairq.Handled] = await fairq.aio.AsyncWorker(aq, handler, batch=len(BODIES)).step()
            assert await aq.result("value") == {"doubled": 42}
            assert await aq.wait("value", timeout=1) == {"doubled": 42}
            with pytest.raises(TimeoutError):
                await aq.wait("retry", timeout=0.05)
            with pytest.raises(fairq.ResultNotReady):
                await aq.wait("fail", timeout=1)
            return handled

    check(make_queue(max_body_bytes=256), asyncio.run(main()))
