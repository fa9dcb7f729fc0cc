"""The PostgreSQL store's pool of connections: threads sharing one Queue hold their
transactions at once, on at most fairq_pool connections opened as needed; a pooled
connection whose server session was ended fails one call (Unavailable, nothing written)
and the next call works; close() closes every connection; bad fairq_pool values are
refused naming the parameter."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

import fairq
import fairq.aio
from fairq.stores.postgres.pool import Pool
from fairq.stores.postgres.url import POOL_SIZE, parse
from pgsessions import psycopg

HANG = 60  # seconds; only to stop a hung test
MEET = 20  # seconds threads wait for each other inside their transactions; only to stop a hang


def sessions(url: str, name: str) -> list[int]:
    """The server processes of the sessions whose application name is `name`."""
    with psycopg.connect(url, autocommit=True) as admin:
        return [int(row[0]) for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,))]


def settle_at_once(q: fairq.Queue, n: int, unsettled: list[fairq.Lease] | None = None) -> dict[int, Any]:
    """n threads each claim an event and ack it with an effect that waits until
    every thread's effect has begun: each thread's transaction is open at the
    same time. A thread whose call raised Unavailable stops waiting for the
    others, records the error, and leaves its lease (if it had one) in
    `unsettled`. What each thread got: the server process its effect ran on,
    or the error."""
    met = threading.Barrier(n)
    got: dict[int, Any] = {}

    def effect(i: int, conn: Any) -> None:
        got[i] = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        met.wait(MEET)  # every other thread is inside its own transaction now

    def run(i: int) -> None:
        lease = None
        try:
            lease = q.claim()
            assert lease is not None
            q.ack(lease, effect=lambda conn: effect(i, conn))
        except fairq.Unavailable as exc:
            got[i] = exc
            if lease is not None and unsettled is not None:
                unsettled.append(lease)
            met.wait(MEET)  # the others still meet
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's assertions
            got[i] = exc
            met.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG)
    return got


def test_threads_sharing_a_queue_hold_their_transactions_at_the_same_time(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        q.enqueue_many([(f"e{i}", {}, f"f{i}") for i in range(POOL_SIZE)])
        got = settle_at_once(q, POOL_SIZE)  # with one shared connection the effects could never all begin
        assert all(isinstance(pid, int) for pid in got.values()), got
        assert len(set(got.values())) == POOL_SIZE  # each transaction on a connection of its own
        assert q.stats().counts["acked"] == POOL_SIZE


def test_an_async_queue_runs_the_calls_of_concurrent_tasks_at_once_on_the_pool(pg_url: str) -> None:
    async def main() -> dict[int, int]:
        async with fairq.aio.AsyncQueue(pg_url) as q:
            assert q.sync.parallel_calls == POOL_SIZE
            await q.enqueue_many([(f"e{i}", {}, f"f{i}") for i in range(POOL_SIZE)])
            met = threading.Barrier(POOL_SIZE)  # with calls taking turns on one thread, never met
            got: dict[int, int] = {}

            def effect(i: int, conn: Any) -> None:
                got[i] = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
                met.wait(MEET)

            async def one(i: int) -> None:
                lease = await q.claim()
                assert lease is not None
                await q.ack(lease, effect=lambda conn: effect(i, conn))

            await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(POOL_SIZE))), HANG)
            assert (await q.stats()).counts["acked"] == POOL_SIZE
            return got

    got = asyncio.run(main())
    assert len(set(got.values())) == POOL_SIZE  # each task's transaction on a connection of its own


def test_a_queue_opens_connections_only_as_calls_need_them_and_never_more_than_fairq_pool(
        pg_url: str) -> None:
    name = f"fairq-pool-{uuid.uuid4().hex[:8]}"
    with fairq.Queue(f"{pg_url}&fairq_pool=2&application_name={name}") as q:
        q.enqueue_many([(f"e{i}", {}, f"f{i % 6}") for i in range(60)])
        for _ in range(5):
            q.ack(q.claim())
        assert len(sessions(pg_url, name)) == 1  # one thread, one call at a time: one connection
        most, stop = [0], threading.Event()

        def watch() -> None:
            while not stop.is_set():
                most[0] = max(most[0], len(sessions(pg_url, name)))

        def work() -> None:
            while (lease := q.claim()) is not None:
                q.ack(lease, effect=lambda conn: time.sleep(0.01))  # holds its connection a while

        watcher = threading.Thread(target=watch)
        watcher.start()
        workers = [threading.Thread(target=work) for _ in range(6)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(HANG)
        stop.set()
        watcher.join(HANG)
        assert q.stats().counts["acked"] == 60
        assert most[0] <= 2 and len(sessions(pg_url, name)) <= 2


def test_a_pooled_connection_whose_session_was_ended_fails_one_call_and_the_next_call_works(
        pg_url: str) -> None:
    with fairq.Queue(f"{pg_url}&fairq_pool=3") as q:
        q.enqueue_many([(f"{flow}{i}", {}, flow) for flow in "abc" for i in range(3)])
        first = settle_at_once(q, 3)  # three connections open, now idle
        victim = first[1]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            # Ends one pooled connection's session, and waits (up to 10 s) until it has.
            assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (victim,)).fetchone()[0]
        unsettled: list[fairq.Lease] = []
        second = settle_at_once(q, 3, unsettled)  # takes every idle connection: one is the ended one
        failed = [got for got in second.values() if isinstance(got, fairq.Unavailable)]
        assert len(failed) == 1, second  # only the call that met it: the next calls open a new one
        assert victim not in second.values()
        assert sum(isinstance(got, int) for got in second.values()) == 2, second
        for lease in unsettled:  # a claim that worked before its ack met the ended session
            assert q.ack(lease).state is fairq.State.ACKED
        third = settle_at_once(q, 3)  # every call works again
        assert all(isinstance(got, int) for got in third.values()), third
        while (lease := q.claim()) is not None:
            q.ack(lease)
        assert q.stats().counts["acked"] == 9


def test_close_closes_every_connection_of_the_pool(pg_url: str) -> None:
    name = f"fairq-close-{uuid.uuid4().hex[:8]}"
    q = fairq.Queue(f"{pg_url}&fairq_pool=3&application_name={name}")
    q.enqueue_many([(f"e{i}", {}, f"f{i}") for i in range(3)])
    assert all(isinstance(got, int) for got in settle_at_once(q, 3).values())
    assert len(sessions(pg_url, name)) == 3
    q.close()
    deadline = time.monotonic() + HANG
    while sessions(pg_url, name) and time.monotonic() < deadline:  # a session ends soon after its client closes
        time.sleep(0.01)
    assert sessions(pg_url, name) == []
    with pytest.raises(fairq.UsageError):
        q.stats()


def test_an_effect_calling_its_own_queue_is_still_refused_while_other_threads_run(pg_url: str) -> None:
    with fairq.Queue(pg_url) as q:
        q.enqueue("e", {})
        lease = q.claim()
        with pytest.raises(fairq.UsageError, match="inside its own effect"):
            q.ack(lease, effect=lambda conn: q.stats())
        assert q.get("e").state is fairq.State.INFLIGHT  # the ack was rolled back
        assert q.ack(lease).state is fairq.State.ACKED


@pytest.mark.parametrize("value", ["0", "-1", "101", "abc", "", "2.5", "²"])
def test_a_bad_fairq_pool_is_refused_naming_it(value: str) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        parse(f"postgresql://u@h/db?fairq_pool={value}")
    assert info.value.field == "fairq_pool"


def test_fairq_pool_sets_the_pool_size_and_is_kept_from_the_driver() -> None:
    target = parse("postgresql://u@h/db?fairq_pool=12&sslmode=disable")
    assert target.pool == 12 and target.conninfo == "postgresql://u@h/db?sslmode=disable"
    assert parse("postgresql://u@h/db").pool == POOL_SIZE


class Opener:
    """Connections for a Pool: numbered objects, with a record of which were closed."""

    def __init__(self) -> None:
        self.made, self.closed, self.fail = 0, [], False

    def open(self) -> int:
        if self.fail:
            raise fairq.Unavailable("test", "the server is out of reach")
        self.made += 1
        return self.made

    def close(self, conn: int) -> None:
        self.closed.append(conn)


def test_the_pool_hands_out_the_last_connection_given_back_and_opens_one_only_when_none_is_idle() -> None:
    opener = Opener()
    pool = Pool(opener.open, opener.close, 3)
    a, b = pool.take(), pool.take()
    assert (a, b) == (1, 2)
    pool.give(a, keep=True)
    pool.give(b, keep=True)
    assert pool.take() == 2 and pool.take() == 1 and opener.made == 2  # last in, first out
    pool.give(1, keep=False)  # lost: closed, its place freed
    assert opener.closed == [1] and pool.take() == 3


def test_a_take_waits_while_every_connection_is_in_use_and_close_ends_the_wait() -> None:
    opener = Opener()
    pool = Pool(opener.open, opener.close, 1)
    held = pool.take()
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pool.take()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and opener.made == 1  # waits: the one place is taken
    pool.give(held, keep=True)
    waiter.join(HANG)
    assert got == [held]
    second = threading.Thread(target=lambda: got.append(pool.take()))
    second.start()
    pool.close()
    second.join(HANG)
    assert got == [held, None]  # a closed pool hands out nothing
    pool.give(held, keep=True)
    assert opener.closed == [held]  # given back after close: closed


def test_a_connection_that_fails_to_open_frees_its_place_and_renew_replaces_the_idle_ones() -> None:
    opener = Opener()
    pool = Pool(opener.open, opener.close, 1)
    opener.fail = True
    with pytest.raises(fairq.Unavailable):
        pool.take()
    opener.fail = False
    first = pool.take()
    assert first == 1  # the failed open took no place for good
    pool.give(first, keep=True)
    pool.renew(99)
    assert opener.closed == [1] and pool.take() == 99
