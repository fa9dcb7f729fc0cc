"""fairq.testing: a private queue on a model clock, and drain() running every job inline with a
worker's decisions, moving the model clock through delays and backoffs instead of sleeping."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

import fairq
import fairq.testing
from helpers import check_invariants


def test_a_handler_that_fails_twice_drains_in_three_attempts_on_the_model_clock_without_sleeping() -> None:
    seen: list[tuple[int, float]] = []
    with fairq.testing.queue() as q:
        q.enqueue("flaky", {"to": "ada"})

        def send(job: fairq.Job) -> None:
            seen.append((job.attempts, q.clock()))
            if job.attempts < 3:
                raise ConnectionError("smtp down")

        began = time.perf_counter()
        drained = fairq.testing.drain(q, send)
        took = time.perf_counter() - began
        info = q.get("flaky")
        check_invariants(q.path)

    assert took < 1.0  # the backoffs (about 1 s, then 2 s, of queue time) are never slept
    assert [attempts for attempts, _ in seen] == [1, 2, 3]
    assert seen[0][1] == fairq.testing.START
    assert seen[0][1] < seen[1][1] < seen[2][1]  # each retry ran once its backoff was over
    assert info is not None and info.state is fairq.State.ACKED and info.attempts == 3
    assert drained.counts["claimed"] == 3 and drained.counts["retried"] == 2 and drained.counts["acked"] == 1
    assert drained.states == {"flaky": fairq.State.ACKED}
    assert [str(e) for e in drained.errors["flaky"]] == ["smtp down", "smtp down"]
    assert all(isinstance(e, ConnectionError) for e in drained.errors["flaky"])
    assert drained.now == seen[2][1]


def test_errors_are_kept_per_event_and_states_are_final() -> None:
    with fairq.testing.queue(max_attempts=2) as q:
        q.enqueue_many([("ok", {"n": 1}), ("always", {"n": 2}), ("refused", {"n": 3}, "orders"),
                        ("behind", {"n": 4}, "orders")])

        def handle(job: fairq.Job) -> None:
            if job.event_id == "always":
                raise KeyError(job.attempts)
            if job.event_id == "refused":
                raise fairq.Fail("card declined")

        drained = fairq.testing.drain(q, handle)
        assert q.get("always").reason == "KeyError: 2"

    assert drained.states == {"ok": fairq.State.ACKED, "always": fairq.State.QUARANTINED,
                              "refused": fairq.State.QUARANTINED, "behind": fairq.State.READY}
    assert "ok" not in drained.errors and "behind" not in drained.errors
    assert [e.args for e in drained.errors["always"]] == [(1,), (2,)]
    assert [type(e) for e in drained.errors["refused"]] == [fairq.Fail]
    assert drained.counts == {"claimed": 4, "acked": 1, "retried": 1, "released": 0, "quarantined": 2,
                              "lost": 0, "abandoned": 0}


def test_a_delayed_event_and_a_retry_delay_move_the_clock_to_their_due_times() -> None:
    with fairq.testing.queue() as q:
        q.enqueue("tomorrow", {}, delay=86_400)
        ran: dict[str, list[float]] = {}

        def handle(job: fairq.Job) -> None:
            ran.setdefault(job.event_id, []).append(q.clock())
            if job.attempts == 1:
                raise fairq.Retry("not yet", delay=600)

        drained = fairq.testing.drain(q, handle)
        assert q.clock() == drained.now == fairq.testing.START + 86_400 + 600

    assert ran == {"tomorrow": [fairq.testing.START + 86_400, fairq.testing.START + 86_400 + 600]}
    assert [type(e) for e in drained.errors["tomorrow"]] == [fairq.Retry]


def test_a_tenants_rate_is_waited_out_on_the_model_clock() -> None:
    with fairq.testing.queue() as q:
        q.set_tenant("acme", rate=1, burst=1)
        q.enqueue_many([{"event_id": f"e{i}", "body": {}, "flow": f"f{i}", "tenant": "acme"} for i in range(3)])
        at: list[float] = []
        drained = fairq.testing.drain(q, lambda job: at.append(q.clock()))

    assert drained.counts["acked"] == 3
    assert at == [fairq.testing.START, fairq.testing.START + 1, fairq.testing.START + 2]


def test_an_async_handler_runs_to_its_end_with_asyncio_run() -> None:
    with fairq.testing.queue() as q:
        q.enqueue("a", {"n": 2})
        done: list[int] = []

        async def handle(job: fairq.Job) -> None:
            await asyncio.sleep(0)
            if job.attempts == 1:
                raise TimeoutError("gateway")
            done.append(job.body["n"])

        drained = fairq.testing.drain(q, handle)

    assert done == [2] and drained.states == {"a": fairq.State.ACKED}
    assert [type(e) for e in drained.errors["a"]] == [TimeoutError]


def test_draining_an_async_handler_inside_a_running_loop_is_refused_before_anything_runs() -> None:
    async def handle(job: fairq.Job) -> None:
        raise AssertionError("never runs")

    with fairq.testing.queue() as q:
        q.enqueue("a", {})

        async def inside() -> None:
            fairq.testing.drain(q, handle)

        with pytest.raises(fairq.UsageError, match="asyncio.run"):
            asyncio.run(inside())
        assert q.get("a").attempts == 0


def test_max_jobs_stops_a_handler_that_releases_forever_with_a_usage_error() -> None:
    with fairq.testing.queue() as q:
        q.enqueue("loop", {})

        def give_back(job: fairq.Job) -> None:
            raise fairq.Retry("again", delay=0)

        with pytest.raises(fairq.UsageError, match="max_jobs"):
            fairq.testing.drain(q, give_back, max_jobs=3)
        # The fourth claim was given back unused: the budget of five saw three attempts.
        assert q.get("loop").state is fairq.State.READY and q.get("loop").attempts == 3
        with pytest.raises(fairq.InvalidInput, match="max_jobs"):
            fairq.testing.drain(q, give_back, max_jobs=0)


def test_a_handler_that_is_not_callable_is_refused_naming_the_argument() -> None:
    with fairq.testing.queue() as q:
        with pytest.raises(fairq.InvalidInput, match="tasks_or_handler"):
            fairq.testing.drain(q, "send_email")


def test_the_private_queue_is_removed_when_closed() -> None:
    q = fairq.testing.queue(lease_seconds=5)
    q.enqueue("a", {})
    folder, path = q.directory, q.path
    assert path.exists() and path.parent == folder
    assert q.policy().lease_seconds == 5
    q.close()
    assert not folder.exists()
    with pytest.raises(fairq.UsageError):
        q.enqueue("b", {})
    q.close()  # closing again is harmless


def test_a_queue_left_open_is_removed_when_collected() -> None:
    q = fairq.testing.queue()
    q.enqueue("a", {})
    folder = q.directory
    assert folder.exists()
    del q
    gc.collect()
    assert not folder.exists()


def test_each_private_queue_is_new_and_starts_at_the_documented_time() -> None:
    with fairq.testing.queue() as a, fairq.testing.queue(start=1_000.0) as b:
        a.enqueue("x", {})
        assert b.get("x") is None and a.path != b.path
        assert a.clock() == fairq.testing.START == 1_767_225_600.0
        assert b.clock() == 1_000.0
        assert a.stats().now == fairq.testing.START


@pytest.mark.parametrize("given", ["path", "clock"])
def test_the_path_and_the_clock_are_the_private_queues_own(given: str) -> None:
    with pytest.raises(fairq.InvalidInput, match=given):
        fairq.testing.queue(**{given: "elsewhere.db"})


def test_the_model_clock_only_moves_forward() -> None:
    clock = fairq.testing.ModelClock(10.0)
    assert clock.advance(5) == 15.0 and clock() == 15.0
    with pytest.raises(fairq.InvalidInput, match="now"):
        clock.set(14.0)
    with pytest.raises(fairq.InvalidInput, match="seconds"):
        clock.advance(-1)
    assert clock() == 15.0


def test_drain_runs_a_queue_of_ones_own_on_a_callable_clock_with_explicit_times(tmp_path) -> None:
    clock = fairq.testing.ModelClock(500.0)
    with fairq.Queue(tmp_path / "q.db", clock=clock) as q:
        q.enqueue("later", {}, delay=30)
        drained = fairq.testing.drain(q, lambda job: None)
        assert drained.now == 530.0 and q.get("later").settled_at == 530.0
    assert clock() == 500.0  # a queue's own clock is not drain's to move: every call said now=
    assert drained.states == {"later": fairq.State.ACKED}


def test_fairq_testing_is_reachable_from_the_package() -> None:
    assert fairq.testing.drain is not None and "testing" not in fairq.__all__
