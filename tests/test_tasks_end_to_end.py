"""Tasks end to end: Task.enqueue stores the task's kind (and policy) with the event, and
fairq.Worker, fairq.aio.AsyncWorker and `fairq work MODULE:TASKS` (a real process) run
each event's task by it. Needs the store to keep kinds (Queue.enqueue(kind=...), Lease.kind).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import fairq
import fairq.aio
import task_registry
from helpers import HANG, SHORT_SETTINGS, counts, start


def test_a_task_enqueues_its_kind_and_a_worker_runs_it_by_that_kind(tmp_path: Path) -> None:
    tasks = fairq.Tasks()
    seen = []

    @tasks.task("send", max_attempts=2)
    def send(job: fairq.Job) -> None:
        seen.append((job.event_id, job.kind))
        if job.body.get("fail"):
            raise ValueError("always")

    with fairq.Queue(tmp_path / "q.db", **SHORT_SETTINGS) as q:
        first = send.enqueue(q, {"to": "ann"}, event_id="m1", flow="F")
        send.enqueue(q, {"fail": True}, event_id="m2", flow="G")
        q.enqueue("x1", {}, kind="nope")
        assert first.event_id == "m1" and first.created
        worker = fairq.Worker(q, tasks, idle_max=0.05)
        worker.run(until_empty=True, signals=False)
        assert ("m1", "send") in seen
        assert q.get("m1").state is fairq.State.ACKED
        assert q.get("m2").state is fairq.State.QUARANTINED and q.get("m2").attempts == 2  # the task's budget
        assert (q.get("x1").state, q.get("x1").reason) == (fairq.State.QUARANTINED, "unknown_kind: nope")


def test_an_async_worker_runs_tasks_enqueued_through_an_async_queue(tmp_path: Path) -> None:
    async def main() -> dict[str, int]:
        async with fairq.aio.AsyncQueue(fairq.Queue(tmp_path / "q.db", **SHORT_SETTINGS)) as aq:
            await task_registry.later.enqueue(aq, {}, event_id="l1")
            await task_registry.plain.enqueue(aq, {}, event_id="p1")
            ran = await fairq.aio.AsyncWorker(aq, task_registry.mixed).run(until_idle=True, signals=False)
            assert (await aq.get("l1")).state is fairq.State.ACKED
            assert (await aq.get("p1")).state is fairq.State.ACKED
            return ran

    assert asyncio.run(main())["acked"] == 2


def test_fairq_work_runs_a_registry_by_kind_and_releases_unknown_kinds_when_told(tmp_path: Path, marks) -> None:
    db = tmp_path / "q.db"
    with fairq.Queue(db) as q:
        task_registry.add.enqueue(q, {"a": 1, "b": 2}, event_id="a1")
        task_registry.note.enqueue(q, {}, event_id="n1")
        q.enqueue("x1", {}, kind="send_sms")
    proc = start(db, "task_registry:tasks", "--until-idle", "--unknown", "release", marks=marks)
    _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    assert sorted(p.name.split(".")[:2] for p in marks.iterdir()) == [["add", "a1"], ["note", "n1"]]
    assert counts(db)["acked"] == 2 and counts(db)["ready"] == 1
    proc = start(db, "task_registry:tasks", "--until-idle", "--processes", "--concurrency", "2", marks=marks)
    _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    with fairq.Queue(db) as q:
        info = q.get("x1")
        assert (info.state, info.reason) == (fairq.State.QUARANTINED, "unknown_kind: send_sms")
