"""fairq.testing.drain with a task registry and results: each job runs the task its kind names,
with that task's own retry budget and backoff, and what a task returns is the event's result."""

from __future__ import annotations

import time

import pytest

import fairq
import fairq.testing


def registry() -> tuple[fairq.Tasks, dict[str, int]]:
    tasks = fairq.Tasks()
    calls = {"send_email": 0, "resize": 0}

    @tasks.task(name="send_email", max_attempts=2, backoff=fairq.Backoff(base=60, factor=1, cap=60, jitter=False))
    def send_email(job: fairq.Job) -> dict[str, str]:
        calls["send_email"] += 1
        if job.body["to"] == "nobody":
            raise ConnectionError("no such mailbox")
        return {"sent_to": job.body["to"]}

    @tasks.task(name="resize")
    async def resize(job: fairq.Job) -> int:
        calls["resize"] += 1
        return job.body["width"] // 2

    return tasks, calls


def test_drain_runs_each_job_by_its_kind_and_keeps_what_the_task_returns_as_its_result() -> None:
    tasks, calls = registry()
    with fairq.testing.queue() as q:
        tasks.get("send_email").enqueue(q, {"to": "ada@example.com"}, event_id="mail-1")
        tasks.get("resize").enqueue(q, {"width": 640}, event_id="img-1")
        began = time.perf_counter()
        drained = fairq.testing.drain(q, tasks)
        assert time.perf_counter() - began < 1.0
        assert q.result("mail-1") == {"sent_to": "ada@example.com"}
        assert q.result("img-1") == 320
        assert q.get("mail-1").kind == "send_email"

    assert calls == {"send_email": 1, "resize": 1}
    assert drained.states == {"mail-1": fairq.State.ACKED, "img-1": fairq.State.ACKED}
    assert drained.errors == {}


def test_a_tasks_own_budget_and_backoff_judge_its_events_under_drain() -> None:
    tasks, calls = registry()
    with fairq.testing.queue(max_attempts=5) as q:  # the queue's budget is larger than the task's
        tasks.get("send_email").enqueue(q, {"to": "nobody"}, event_id="mail-2")
        drained = fairq.testing.drain(q, tasks)
        info = q.get("mail-2")
        with pytest.raises(fairq.ResultNotReady) as refused:
            q.result("mail-2")

    assert calls["send_email"] == 2 and info.state is fairq.State.QUARANTINED and info.attempts == 2
    assert drained.now == fairq.testing.START + 60  # the task's backoff, without jitter
    assert refused.value.state is fairq.State.QUARANTINED
    assert [str(e) for e in drained.errors["mail-2"]] == ["no such mailbox"] * 2


def test_a_job_of_a_kind_no_task_has_is_quarantined_as_unknown() -> None:
    tasks, _ = registry()
    with fairq.testing.queue() as q:
        q.enqueue("odd", {}, kind="no_such_task")
        drained = fairq.testing.drain(q, tasks)
        assert q.get("odd").reason == "unknown_kind: no_such_task"

    assert drained.states == {"odd": fairq.State.QUARANTINED} and drained.counts["quarantined"] == 1


def test_a_plain_handlers_return_value_is_the_result_and_none_is_no_result() -> None:
    with fairq.testing.queue() as q:
        q.enqueue_many([("with", {"n": 2}), ("without", {"n": 0})])
        fairq.testing.drain(q, lambda job: job.body["n"] * 21 or None)
        assert q.result("with") == 42
        assert q.result("without") is None


def test_a_result_the_queue_cannot_keep_quarantines_the_event_as_a_worker_does() -> None:
    with fairq.testing.queue(max_body_bytes=64) as q:
        q.enqueue_many([("set", {}), ("big", {})])
        drained = fairq.testing.drain(q, lambda job: {1, 2} if job.event_id == "set" else "x" * 100)
        for event_id in ("set", "big"):
            info = q.get(event_id)
            assert info.state is fairq.State.QUARANTINED and info.reason.startswith("bad_result: ")
        assert drained.errors == {}  # the handler raised nothing: its result was refused, as a worker refuses it
