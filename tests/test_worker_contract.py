"""The worker's handler contract at its edges: async and ill-shaped handlers are
refused, an awaitable result or a strange exception is a retry, a per-job timeout
frees a hung handler's event, schedules tick where work runs, the stop modes,
and what is logged. Timeouts here only stop hangs."""

from __future__ import annotations

import functools
import gc
import logging
import threading
import time
import warnings

import pytest

import fairq

HANG = 60  # seconds; only to stop a hung test


def ok(job: fairq.Job) -> None:
    pass


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


# -- (A) async and ill-shaped handlers --------------------------------------------


async def async_handler(job: fairq.Job) -> None:
    pass


class AsyncCallable:
    async def __call__(self, job: fairq.Job) -> None:
        pass


@pytest.mark.parametrize("handler", [async_handler, AsyncCallable(), functools.partial(async_handler)],
                         ids=["coroutine function", "async __call__", "partial"])
def test_an_async_handler_is_refused_when_the_worker_is_built(q: fairq.Queue, handler) -> None:
    with pytest.raises(fairq.InvalidInput) as refused:
        fairq.Worker(q, handler)
    assert refused.value.field == "handler"
    assert "fairq.aio.AsyncWorker" in str(refused.value) and "not supported" not in str(refused.value)


def test_a_handler_returning_an_awaitable_is_a_retry_and_its_coroutine_is_closed(q: fairq.Queue) -> None:
    q.enqueue("a", {})
    ran = []

    async def work() -> None:
        ran.append(True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        [handled] = fairq.Worker(q, lambda job: work()).step()
        gc.collect()
    assert handled.outcome is fairq.RETRY and "awaitable" in handled.reason
    assert q.get("a").state is fairq.State.READY
    assert ran == []
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


def no_arguments() -> None:
    pass


def two_arguments(job, other) -> None:
    pass


def keyword_only(*, job) -> None:
    pass


@pytest.mark.parametrize("handler", [no_arguments, two_arguments, keyword_only])
def test_a_handler_that_cannot_take_a_job_is_refused_when_the_worker_is_built(q: fairq.Queue, handler) -> None:
    q.enqueue("a", {})
    with pytest.raises(fairq.InvalidInput) as refused:
        fairq.Worker(q, handler)
    assert refused.value.field == "handler" and "Job" in str(refused.value)
    assert q.get("a").attempts == 0


def with_defaults(job, extra=1, *rest, **options) -> None:
    pass


@pytest.mark.parametrize("handler", [with_defaults, lambda *args: None, functools.partial(two_arguments, other=1),
                                     print], ids=["defaults", "varargs", "partial", "unreadable signature"])
def test_a_handler_that_can_take_a_job_is_accepted(q: fairq.Queue, handler) -> None:
    fairq.Worker(q, handler)


# -- (B) a handler exception that cannot be described --------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_an_exception_whose_str_raises_is_a_retry_and_the_rest_of_the_batch_is_settled(q: fairq.Queue) -> None:
    q.enqueue_many([("a", {}, "A"), ("b", {"bad": True}, "B"), ("c", {}, "C")])

    def handler(job: fairq.Job) -> None:
        if job.body.get("bad"):
            raise Unprintable()

    worker = fairq.Worker(q, handler, batch=3)
    counts = worker.run(until_idle=True, signals=False)
    assert counts["acked"] == 2 and counts["retried"] == 1
    assert q.get("a").state is fairq.State.ACKED and q.get("c").state is fairq.State.ACKED
    b = q.get("b")
    assert b.state is fairq.State.READY and b.reason.startswith("Unprintable")


# -- (C) stop modes, timeout, tick ------------------------------------------------------


def test_until_empty_waits_through_backoffs_and_delays_and_ignores_quarantined(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {}, f"F{i}") for i in range(5)])
    q.enqueue("later", {}, flow="L", delay=0.5)
    q.enqueue("bad", {"fail": True}, flow="B")

    def handler(job: fairq.Job) -> None:
        if job.body.get("fail"):
            raise fairq.Fail("refused by the test")
        if job.attempts == 1 and job.event_id != "later":
            raise fairq.Retry("first try", delay=0.3)

    counts = fairq.Worker(q, handler, concurrency=2).run(until_empty=True, signals=False)
    assert counts["acked"] == 6 and counts["quarantined"] == 1
    stats = q.stats()
    assert stats.counts["ready"] == 0 and stats.counts["inflight"] == 0


def test_until_idle_still_leaves_retries_in_backoff_behind(q: fairq.Queue) -> None:
    q.enqueue("a", {})

    def handler(job: fairq.Job) -> None:
        raise fairq.Retry("later", delay=60)

    assert fairq.Worker(q, handler).run(until_idle=True, signals=False)["retried"] == 1
    assert q.get("a").state is fairq.State.READY


def test_until_idle_and_until_empty_cannot_be_asked_together(q: fairq.Queue) -> None:
    with pytest.raises(fairq.InvalidInput):
        fairq.Worker(q, ok).run(until_idle=True, until_empty=True)


def test_a_handler_past_its_timeout_is_retried_with_reason_timeout_and_its_flow_moves_on(make_queue) -> None:
    q = make_queue(lease_seconds=30, backoff=fairq.Backoff(base=0.01, jitter=False))
    q.enqueue_many([("hang", {"hang": True}, "F"), ("next", {}, "F")])
    release = threading.Event()

    def handler(job: fairq.Job) -> None:
        if job.body.get("hang") and job.attempts == 1:
            release.wait(HANG)

    worker = fairq.Worker(q, handler, timeout=0.3, concurrency=2)
    runner = threading.Thread(target=lambda: worker.run(signals=False))
    runner.start()
    try:
        watcher = fairq.Queue(q.path)
        wait_until(lambda: watcher.get("next").state is fairq.State.ACKED, "the flow never moved on")
        hang = watcher.get("hang")
        assert hang.state is fairq.State.ACKED and hang.attempts == 2
        assert [a.reason for a in watcher.audit("hang") if a.action == "retry"] == ["timeout"]
        watcher.close()
    finally:
        release.set()
        worker.stop()
        runner.join(HANG)
    assert worker.counts()["lost"] == 0


def test_a_timeout_settles_its_whole_batch_at_once(make_queue) -> None:
    # One thread, one batch of three flows: A acks, B hangs past the timeout,
    # C has not started. B is retried with reason timeout, A's ack is written
    # and C is given back unspent, all while B's handler still runs.
    q = make_queue(lease_seconds=30)
    q.enqueue_many([("a", {}, "A"), ("b", {"hang": True}, "B"), ("c", {}, "C")])
    release, finished = threading.Event(), []

    def handler(job: fairq.Job) -> None:
        if job.body.get("hang"):
            release.wait(HANG)
        finished.append(job.event_id)

    worker = fairq.Worker(q, handler, batch=3, timeout=0.3)
    result: list[list[fairq.Handled]] = []
    runner = threading.Thread(target=lambda: result.append(worker.step()))
    runner.start()
    try:
        watcher = fairq.Queue(q.path)
        wait_until(lambda: watcher.get("b").reason == "timeout", "the late handler was not given up")
        assert watcher.get("a").state is fairq.State.ACKED
        c = watcher.get("c")
        assert c.state is fairq.State.READY and c.attempts == 0
        watcher.close()
    finally:
        release.set()
        runner.join(HANG)
    assert finished == ["a", "b"]  # c was released, never run
    assert [(h.event_id, h.outcome, h.reason) for h in result[0]] == [
        ("a", fairq.ACK, None), ("b", fairq.RETRY, "timeout"), ("c", fairq.Outcome.RELEASE, None)]
    assert worker.counts() == dict(worker.counts(), acked=1, retried=1, released=1, lost=0)


def test_a_batch_among_several_claimers_takes_a_fair_share_of_the_heads(q: fairq.Queue) -> None:
    q.enqueue_many([(f"f{f}-{i}", {}, f"F{f}") for f in range(8) for i in range(2)])
    handled = fairq.Worker(q, ok, concurrency=4, batch=50).step()
    assert len(handled) == 2  # 8 claimable heads among 4 claimers
    assert len(fairq.Worker(q, ok, batch=50).step()) == 8  # a lone claimer takes them all


def test_a_timeout_must_be_positive(q: fairq.Queue) -> None:
    with pytest.raises(fairq.InvalidInput) as refused:
        fairq.Worker(q, ok, timeout=0)
    assert refused.value.field == "timeout"


def test_a_ticking_worker_runs_due_schedule_instances(q: fairq.Queue) -> None:
    q.schedules.add("report", every=3600, start=time.time() - 10, body={"kind": "report"})
    seen = []
    fairq.Worker(q, lambda job: seen.append(job.body), tick=True).run(until_idle=True, signals=False)
    assert [(body["schedule"], body["body"]) for body in seen] == [("report", {"kind": "report"})]


def test_a_worker_without_tick_leaves_schedules_alone(q: fairq.Queue) -> None:
    q.schedules.add("report", every=3600, start=time.time() - 10)
    fairq.Worker(q, ok).run(until_idle=True, signals=False)
    assert q.stats().totals["enqueued"] == 0


# -- (D) logging ------------------------------------------------------------------------------


def test_a_handler_error_is_logged_with_its_traceback(q: fairq.Queue, caplog) -> None:
    q.enqueue("a", {})

    def handler(job: fairq.Job) -> None:
        {}["missing"]

    caplog.set_level(logging.INFO, logger="fairq")
    assert fairq.Worker(q, handler).run(until_idle=True, signals=False)["retried"] == 1
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "fairq.worker"]
    assert "event_id=a" in record.getMessage() and "KeyError" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is KeyError


def test_a_quarantine_is_logged_at_error_with_its_reason(q: fairq.Queue, caplog) -> None:
    q.enqueue("o5", {})

    def handler(job: fairq.Job) -> None:
        raise fairq.Fail("unknown sku 'toy'")

    caplog.set_level(logging.INFO, logger="fairq")
    fairq.Worker(q, handler).run(until_idle=True, signals=False)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and r.name == "fairq.worker"]
    assert len(errors) == 1 and "event_id=o5" in errors[0] and "unknown sku 'toy'" in errors[0]
    # Said once: the queue's own note of the quarantine stays below INFO.
    shown = [r for r in caplog.records if r.levelno >= logging.INFO and "quarantined" in r.getMessage()
             and "o5" in r.getMessage()]
    assert len(shown) == 1


def test_a_worker_over_a_client_shares_batches_and_runs_until_empty(tmp_path) -> None:
    from helpers import TOKEN, running

    # fairq serve's Server on a thread (`fairq serve` as a real process: test_http_serve.py).
    with fairq.Queue(tmp_path / "q.db") as queue, running(queue) as server:
        with fairq.Client(server.url, token=TOKEN) as client:
            client.enqueue_many([(f"e{i}", {}, f"F{i % 4}") for i in range(12)])
            attempts: dict[str, int] = {}

            def handler(job: fairq.Job) -> None:
                attempts[job.event_id] = job.attempts
                if job.attempts == 1:
                    raise fairq.Retry("first try", delay=0.2)

            counts = fairq.Worker(client, handler, concurrency=2, batch=10, tick=True, idle_max=0.05).run(
                until_empty=True, signals=False)
            assert counts["acked"] == 12 and counts["retried"] == 12
            assert client.stats().counts["ready"] == 0
