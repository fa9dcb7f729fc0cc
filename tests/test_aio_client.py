"""fairq.aio.AsyncClient: the HTTP client's verbs as coroutines, and an AsyncWorker draining
a `fairq serve` server through it."""

from __future__ import annotations

import asyncio

import pytest

import fairq
import fairq.aio
from helpers import TOKEN, running


def test_the_client_verbs_are_coroutines_with_the_sync_results(client: fairq.Client) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncClient(client) as c:
            assert (await c.enqueue("a", {"n": 1}, flow="f")).created
            lease = await c.claim(owner="me")
            assert lease is not None and lease.event_id == "a"
            assert (await c.settle(lease, "ack")).state is fairq.State.ACKED
            assert (await c.stats()).counts["acked"] == 1
            info = await c.get("a")
            assert info is not None and info.state is fairq.State.ACKED

    asyncio.run(main())


def test_an_async_worker_drains_a_server_through_the_async_client(make_queue) -> None:
    handled: list[str] = []

    async def handler(job: fairq.Job) -> None:
        await asyncio.sleep(0.001)
        handled.append(job.event_id)

    with running(make_queue()) as server:
        async def main() -> None:
            async with fairq.aio.AsyncClient(server.url, token=TOKEN, timeout=10) as c:
                await c.enqueue_many([(f"e{i}", {}, f"F{i % 4}") for i in range(12)])
                counts = await fairq.aio.AsyncWorker(c, handler, concurrency=4).run(until_idle=True, signals=False)
                assert counts["acked"] == 12
                assert (await c.stats()).counts["acked"] == 12

        asyncio.run(main())
    assert sorted(handled) == sorted(f"e{i}" for i in range(12))


def test_the_async_client_acks_retries_fails_and_releases_through_a_server(client: fairq.Client) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncClient(client) as c:
            await c.enqueue_many([(name, {}, name) for name in ("a", "r", "f", "l")])
            leases = {lease.event_id: lease for lease in await c.claim_many(4, owner="me")}
            assert (await c.ack(leases["a"])).state is fairq.State.ACKED
            assert (await c.retry(leases["r"], "later", delay=60)).state is fairq.State.READY
            assert (await c.fail(leases["f"], "bad input")).state is fairq.State.QUARANTINED
            assert (await c.release(leases["l"])).state is fairq.State.READY
            assert c.ack.__name__ == "ack" and c.fail.__doc__ == fairq.Client.fail.__doc__

    asyncio.run(main())
    states = {name: client.get(name).state for name in ("a", "r", "f", "l")}
    assert states == {"a": fairq.State.ACKED, "r": fairq.State.READY, "f": fairq.State.QUARANTINED,
                      "l": fairq.State.READY}
    assert client.get("l").attempts == 0  # released: the claim was given back unspent


def test_the_async_client_reaches_the_servers_schedules(client: fairq.Client) -> None:
    async def main() -> None:
        async with fairq.aio.AsyncClient(client) as c:
            added = await c.schedules.add("hourly", every=3600, body={"k": 1})
            assert added.name == "hourly" and (await c.schedules.get("hourly")) == added
            assert (await c.schedules.pause("hourly")).paused
            assert not (await c.schedules.resume("hourly")).paused
            assert [s.name for s in await c.schedules.list()] == ["hourly"]
            assert await c.schedules.misfires("hourly") == []
            await c.schedules.remove("hourly")
            with pytest.raises(fairq.UnknownSchedule):
                await c.schedules.get("hourly")

    asyncio.run(main())
    assert client.schedules.list() == []
