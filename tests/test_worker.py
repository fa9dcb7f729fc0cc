"""The worker: the handler contract, batches, threads, processes, idle polling, stop."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import fairq
import work_handlers
from helpers import Receiver, wait_for_marks

HANG = 60  # seconds; only to stop a hung test


def ok(job: fairq.Job) -> None:
    pass


def test_a_returning_handler_acks_its_event(q: fairq.Queue) -> None:
    q.enqueue("a", {"n": 1}, flow="F")
    seen = []
    worker = fairq.Worker(q, lambda job: seen.append((job.event_id, job.flow, job.seq, job.body, job.attempts)))
    [handled] = worker.step()
    assert seen == [("a", "F", 1, {"n": 1}, 1)]
    assert handled.outcome is fairq.ACK and handled.lost is None
    assert handled.settled.state is fairq.State.ACKED
    assert q.get("a").state is fairq.State.ACKED
    assert worker.counts()["acked"] == 1


def test_retry_with_a_delay_comes_back_after_that_delay(q: fairq.Queue) -> None:
    q.enqueue("a", {})

    def handler(job: fairq.Job) -> None:
        raise fairq.Retry("rate limited", delay=120)

    [handled] = fairq.Worker(q, handler).step()
    info = q.get("a")
    assert handled.outcome is fairq.RETRY and handled.reason == "rate limited"
    assert info.state is fairq.State.READY and info.reason == "rate limited"
    assert info.next_at == pytest.approx(time.time() + 120, abs=5)


def test_fail_quarantines_with_its_reason(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")])

    def handler(job: fairq.Job) -> None:
        raise fairq.Fail("unknown sku 'toy'")

    worker = fairq.Worker(q, handler)
    [handled] = worker.step()
    assert handled.settled.state is fairq.State.QUARANTINED
    assert q.get("a1").reason == "unknown sku 'toy'"
    assert worker.step() == []  # a2 waits behind its quarantined head
    assert worker.counts()["quarantined"] == 1


def test_any_other_exception_is_a_retry_named_by_its_type_and_message(q: fairq.Queue) -> None:
    q.enqueue_many([("a", {"kind": "value"}), ("b", {"kind": "empty"}), ("c", {"kind": "huge"})])

    def handler(job: fairq.Job) -> None:
        kind = job.body["kind"]
        if kind == "value":
            raise ValueError("amount must be positive")
        if kind == "empty":
            raise KeyError
        raise RuntimeError("x" * 10_000 + "\x00")

    handled = {h.event_id: h for h in fairq.Worker(q, handler, batch=3).step()}
    assert handled["a"].reason == "ValueError: amount must be positive"
    assert handled["b"].reason == "KeyError"
    assert len(handled["c"].reason) == 4096 and handled["c"].reason.startswith("RuntimeError: xxx")
    for event_id in "abc":
        assert q.get(event_id).state is fairq.State.READY
        assert handled[event_id].outcome is fairq.RETRY


def test_a_badly_built_retry_is_itself_a_retry_naming_the_problem(q: fairq.Queue) -> None:
    q.enqueue("a", {})

    def handler(job: fairq.Job) -> None:
        raise fairq.Retry("later", delay=-1)

    [handled] = fairq.Worker(q, handler).step()
    assert handled.reason == "InvalidInput: delay: must be >= 0, got -1"
    assert q.get("a").state is fairq.State.READY


def test_retry_and_fail_need_a_reason() -> None:
    with pytest.raises(fairq.InvalidInput, match="reason"):
        fairq.Retry("  ")
    with pytest.raises(fairq.InvalidInput, match="reason"):
        fairq.Fail(None)  # type: ignore[arg-type]


def test_a_database_error_at_settle_propagates_and_is_not_a_retry(q: fairq.Queue) -> None:
    q.enqueue("a", {})
    calls = []
    q._store.db.conn.execute(
        "CREATE TEMP TRIGGER no_ack BEFORE UPDATE OF state ON main.event WHEN NEW.state = 'acked' "
        "BEGIN SELECT RAISE(ABORT, 'injected ack failure'); END")
    worker = fairq.Worker(q, calls.append)
    with pytest.raises(fairq.StoreError, match="injected ack failure"):
        worker.step()
    q._store.db.conn.execute("DROP TRIGGER temp.no_ack")
    info = q.get("a")
    assert len(calls) == 1
    assert info.state is fairq.State.INFLIGHT and info.attempts == 1  # the lease will expire, nothing else
    assert q.audit("a") == []


def test_a_locked_database_at_claim_propagates_as_busy(make_queue, db_path) -> None:
    q = make_queue(busy_timeout=0.1)
    q.enqueue("a", {})
    calls = []
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(fairq.Busy):
            fairq.Worker(q, calls.append).step()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert calls == []


def test_step_returns_nothing_when_idle(q: fairq.Queue) -> None:
    assert fairq.Worker(q, ok).step() == []


def test_a_batch_is_one_claim_and_one_settle_transaction(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {"i": i}, f"F{i}") for i in range(6)] + [("F0-2", {"i": 99}, "F0")])

    def handler(job: fairq.Job) -> None:
        if job.body["i"] == 1:
            raise fairq.Retry("later", delay=60)
        if job.body["i"] == 2:
            raise fairq.Fail("bad")

    statements: list[str] = []
    q._store.db.conn.set_trace_callback(statements.append)
    handled = fairq.Worker(q, handler, batch=10).step()
    q._store.db.conn.set_trace_callback(None)
    assert sum(sql.startswith("BEGIN IMMEDIATE") for sql in statements) == 2
    assert [h.event_id for h in handled] == [f"e{i}" for i in range(6)]  # one per flow: F0-2 waits
    states = {h.event_id: h.settled.state for h in handled}
    assert states == {"e0": "acked", "e1": "ready", "e2": "quarantined", "e3": "acked", "e4": "acked",
                      "e5": "acked"}
    assert q.get("e1").next_at == pytest.approx(time.time() + 60, abs=5)


def test_a_stop_during_a_batch_releases_the_unstarted_events_without_spending_an_attempt(make_queue) -> None:
    # On its last attempt a retry would quarantine the event and block its
    # flow; a release gives it back ready, with its attempt unspent.
    q = make_queue(max_attempts=1)
    q.enqueue_many([("a1", {}, "A"), ("b1", {}, "B"), ("b2", {}, "B")])
    ran = []

    def handler(job: fairq.Job) -> None:
        ran.append(job.event_id)
        worker.stop()

    worker = fairq.Worker(q, handler, batch=2)
    handled = worker.step()
    assert ran == ["a1"]
    assert [(h.event_id, h.outcome, h.settled.state) for h in handled] == [
        ("a1", fairq.ACK, fairq.State.ACKED), ("b1", fairq.Outcome.RELEASE, fairq.State.READY)]
    info = q.get("b1")
    assert (info.state, info.attempts, info.reason) == (fairq.State.READY, 0, None)
    assert info.next_at <= time.time()
    assert q.audit("b1") == []
    assert worker.counts()["released"] == 1 and worker.counts()["retried"] == 0
    assert q.claim().event_id == "b1"  # ready at once, its flow not blocked


def test_a_manual_step_after_run_returned_runs_the_whole_batch(q: fairq.Queue) -> None:
    q.enqueue("first", {})
    ran = []

    def handler(job: fairq.Job) -> None:
        ran.append(job.event_id)
        if job.event_id == "first":
            worker.stop()

    worker = fairq.Worker(q, handler, batch=2)
    worker.run(signals=False)
    q.enqueue_many([("x", {}), ("y", {})])
    handled = worker.step()
    assert ran == ["first", "x", "y"]
    assert [h.settled.state for h in handled] == [fairq.State.ACKED, fairq.State.ACKED]


def test_threads_drain_a_backlog_once_each(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {"i": i}, f"F{i % 7}") for i in range(210)])
    seen: list[str] = []
    lock = threading.Lock()

    def handler(job: fairq.Job) -> None:
        with lock:
            seen.append(job.event_id)

    counts = fairq.Worker(q, handler, concurrency=4).run(until_idle=True)
    assert Counter(seen) == Counter(f"e{i}" for i in range(210))
    assert counts == {"claimed": 210, "acked": 210, "retried": 0, "released": 0, "quarantined": 0, "lost": 0,
                      "abandoned": 0}
    assert q.stats().counts["acked"] == 210


def test_threads_with_batches_keep_each_flow_in_order(q: fairq.Queue) -> None:
    q.enqueue_many([(f"{flow}{i}", {"i": i}, flow) for flow in "ABC" for i in range(20)])
    order: dict[str, list[int]] = {"A": [], "B": [], "C": []}

    def handler(job: fairq.Job) -> None:
        order[job.flow].append(job.body["i"])

    fairq.Worker(q, handler, concurrency=3, batch=5).run(until_idle=True)
    assert order == {flow: list(range(20)) for flow in "ABC"}


def test_until_idle_waits_for_a_running_handler_whose_flow_has_more(q: fairq.Queue) -> None:
    # One flow: while a thread handles A1, the other threads find nothing
    # claimable; they must not call it a day before A2 and A3 are done.
    q.enqueue_many([("A1", {}, "A"), ("A2", {}, "A"), ("A3", {}, "A")])
    fairq.Worker(q, lambda job: time.sleep(0.1), concurrency=3).run(until_idle=True)
    assert q.stats().counts["acked"] == 3


def test_until_idle_does_not_stop_while_a_settle_has_just_made_work_claimable(q: fairq.Queue) -> None:
    # Scripted so the race happens every time: thread B finds nothing because
    # A holds the flow's head; A acks A1 (A2 becomes the head) and ends its
    # round; only then does B end its empty round. B must not call the worker
    # idle: A2 is claimable.
    q.enqueue_many([("A1", {}, "A"), ("A2", {}, "A")])
    b_found_nothing, a_ended, b_ended = threading.Event(), threading.Event(), threading.Event()

    def handler(job: fairq.Job) -> None:
        if job.event_id == "A1":
            b_found_nothing.wait(HANG)

    worker = fairq.Worker(q, handler, concurrency=2)
    end_round = worker.core.end_round

    def scripted(handled, seen) -> bool:
        if handled and not a_ended.is_set():  # A, after acking A1
            done = end_round(handled, seen)
            a_ended.set()
            b_ended.wait(HANG)
            return done
        if not handled and not b_ended.is_set():  # B, after its claim found nothing
            b_found_nothing.set()
            a_ended.wait(HANG)
            done = end_round(handled, seen)
            b_ended.set()
            return done
        return end_round(handled, seen)

    worker.core.end_round = scripted
    counts = worker.run(until_idle=True)
    assert q.get("A2").state is fairq.State.ACKED
    assert counts["acked"] == 2


def test_processes_drain_a_backlog_with_one_effect_each(tmp_path, monkeypatch) -> None:
    (tmp_path / "marks").mkdir()
    monkeypatch.setenv("FAIRQ_TEST_INBOX", str(tmp_path / "receiver.db"))
    monkeypatch.setenv("FAIRQ_TEST_LOG", str(tmp_path))
    monkeypatch.setenv("FAIRQ_TEST_MARKS", str(tmp_path / "marks"))
    Receiver(tmp_path / "receiver.db").close()
    with fairq.Queue(tmp_path / "queue.db") as q:
        q.enqueue_many([(f"{flow}{i}", {"delta": i}, flow) for flow in "ABCD" for i in range(1, 26)])
        # Each process's first event waits for a second process: one fast child cannot take it all.
        counts = fairq.Worker(q, work_handlers.relay_in_company, concurrency=3, processes=True).run(
            until_idle=True)
        assert q.stats().counts == {"ready": 0, "inflight": 0, "acked": 100, "quarantined": 0, "discarded": 0}
    assert counts["acked"] == 100 and counts["claimed"] == 100
    receiver = Receiver(tmp_path / "receiver.db")
    assert receiver.receipts() == 100
    assert receiver.projection() == {flow: (sum(range(1, 26)), 25) for flow in "ABCD"}
    receiver.close()
    pids = {p.stem for p in Path(tmp_path).glob("*.log")}
    assert len(pids) >= 2 and str(os.getpid()) not in pids  # the work ran in other processes


def test_a_worker_process_that_fails_while_stopping_makes_run_raise(tmp_path, monkeypatch) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("FAIRQ_TEST_MARKS", str(marks))
    with fairq.Queue(tmp_path / "queue.db") as q:
        q.enqueue("e", {})
        worker = fairq.Worker(q, work_handlers.exits_when_stopping, processes=True)
        # SIGTERM once the handler runs (the parent's signal handler is in place before any child starts).
        threading.Thread(target=lambda: (wait_for_marks(marks, 1), os.kill(os.getpid(), signal.SIGTERM)),
                         daemon=True).start()
        with pytest.raises(fairq.FairqError, match="exited with status 5"):
            worker.run()


def test_stop_reaches_worker_processes(tmp_path, monkeypatch) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("FAIRQ_TEST_MARKS", str(marks))
    with fairq.Queue(tmp_path / "queue.db") as q:
        q.enqueue_many([(f"e{i}", {"until_stopping": True}) for i in range(3)])
        worker = fairq.Worker(q, work_handlers.slow, processes=True)
        threading.Thread(target=lambda: (wait_for_marks(marks, 1), worker.stop()), daemon=True).start()
        counts = worker.run(signals=False)
        assert (counts["claimed"], counts["acked"]) == (1, 1)
        assert q.stats().counts == {"ready": 2, "inflight": 0, "acked": 1, "quarantined": 0, "discarded": 0}


def test_processes_refuse_a_queue_whose_settings_cannot_be_sent(make_queue) -> None:
    q = make_queue(clock=lambda: time.time())
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Worker(q, work_handlers.slow, processes=True)
    assert info.value.field == "queue" and "clock=" in str(info.value)


def test_an_idle_worker_backs_off_to_the_longest_pause_and_a_claim_resets_it(q: fairq.Queue) -> None:
    worker = fairq.Worker(q, ok, idle_min=0.01, idle_max=0.2)
    pauses: list[float] = []

    def pause(stop: threading.Event, seconds: float) -> None:  # recorded, not slept
        pauses.append(seconds)
        if len(pauses) == 4:
            q.enqueue("work", {})  # the next round claims it: the pause starts again from idle_min
        if len(pauses) == 11:
            stop.set()

    worker._pause = pause
    worker.run()
    assert pauses == [0.01, 0.02, 0.04, 0.08, 0.01, 0.02, 0.04, 0.08, 0.16, 0.2, 0.2]
    assert worker.counts()["acked"] == 1


def stop_once_started(worker: fairq.Worker, started: threading.Event) -> None:
    """Call worker.stop() from another thread once `started` is set (a handler is running)."""
    threading.Thread(target=lambda: (started.wait(HANG), worker.stop()), daemon=True).start()


def wait_for_state(q: fairq.Queue, event_id: str, state: fairq.State) -> None:
    deadline = time.monotonic() + HANG
    while q.get(event_id).state is not state and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_stop_lets_the_running_handler_finish_and_settles_it(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {}) for i in range(3)])
    started = threading.Event()

    def handler(job: fairq.Job) -> None:
        started.set()
        deadline = time.monotonic() + HANG
        while not job.stopping and time.monotonic() < deadline:  # running when the stop comes
            time.sleep(0.01)
        assert job.stopping

    worker = fairq.Worker(q, handler, stop_timeout=HANG)
    stop_once_started(worker, started)
    counts = worker.run()
    assert counts["acked"] == 1 and counts["claimed"] == 1 and counts["abandoned"] == 0
    assert q.stats().counts == {"ready": 2, "inflight": 0, "acked": 1, "quarantined": 0, "discarded": 0}


def test_a_handler_still_running_after_the_stop_timeout_is_abandoned_to_its_lease(q: fairq.Queue) -> None:
    q.enqueue("slow", {})
    started, release = threading.Event(), threading.Event()
    worker = fairq.Worker(q, lambda job: (started.set(), release.wait(HANG)) and None, stop_timeout=0.2)
    stop_once_started(worker, started)
    counts = worker.run()
    assert counts["abandoned"] == 1 and counts["acked"] == 0
    assert q.get("slow").state is fairq.State.INFLIGHT
    release.set()  # the abandoned handler finishes later; its lease is still live, so it settles
    wait_for_state(q, "slow", fairq.State.ACKED)
    assert q.get("slow").state is fairq.State.ACKED


def test_the_unstarted_rest_of_an_abandoned_batch_is_released_when_run_returns(make_queue) -> None:
    q = make_queue(max_attempts=1)
    q.enqueue_many([("slow", {}), ("next", {})])
    started, release = threading.Event(), threading.Event()
    ran = []

    def handler(job: fairq.Job) -> None:
        ran.append(job.event_id)
        started.set()
        release.wait(HANG)

    worker = fairq.Worker(q, handler, batch=2, stop_timeout=0.1)
    stop_once_started(worker, started)
    counts = worker.run()
    assert (counts["abandoned"], counts["released"]) == (1, 1)
    info = q.get("next")
    assert (info.state, info.attempts) == (fairq.State.READY, 0)  # not left to its lease
    release.set()  # the abandoned handler finishes; its thread settles it and leaves "next" alone
    wait_for_state(q, "slow", fairq.State.ACKED)
    assert q.get("slow").state is fairq.State.ACKED and ran == ["slow"]
    assert worker.counts()["lost"] == 0 and q.get("next").state is fairq.State.READY


def test_run_raises_the_first_queue_error_of_any_thread(q: fairq.Queue) -> None:
    q.enqueue_many([(f"e{i}", {}) for i in range(5)])
    q._store.db.conn.execute(
        "CREATE TEMP TRIGGER no_ack BEFORE UPDATE OF state ON main.event WHEN NEW.state = 'acked' "
        "BEGIN SELECT RAISE(ABORT, 'injected'); END")
    with pytest.raises(fairq.StoreError, match="injected"):
        fairq.Worker(q, ok, concurrency=2, stop_timeout=5).run()
    q._store.db.conn.execute("DROP TRIGGER temp.no_ack")


@pytest.mark.parametrize("kwargs, field", [
    ({"handler": "not callable"}, "handler"),
    ({"concurrency": 0}, "concurrency"),
    ({"batch": 0}, "batch"),
    ({"stop_timeout": -1}, "stop_timeout"),
    ({"idle_min": 0}, "idle_min"),
    ({"idle_min": 2, "idle_max": 1}, "idle_max"),
    ({"owner": ""}, "owner"),
    ({"processes": True, "handler": lambda job: None}, "handler"),
])
def test_bad_worker_settings_are_refused_naming_the_field(q: fairq.Queue, kwargs, field) -> None:
    kwargs = {"handler": ok, **kwargs}
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Worker(q, **kwargs)
    assert info.value.field == field


def test_a_queue_reopens_with_its_own_settings(make_queue, db_path) -> None:
    q = make_queue(lease_seconds=7, max_attempts=2, synchronous="normal", busy_timeout=3)
    again = fairq.Queue(db_path, **q.settings())
    assert (again.lease_seconds, again.max_attempts, again.backoff) == (7, 2, q.backoff)
    assert again._store.db.conn.execute("PRAGMA synchronous").fetchone()[0] == 1
    again.close()
