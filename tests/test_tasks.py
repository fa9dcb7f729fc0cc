"""fairq.Tasks: the registry, the Task object, dispatch by kind (unknown kinds quarantined or
released), and fairq.Worker / fairq.aio.AsyncWorker / `fairq work` running a Tasks.

The workers here run on a real Queue whose claims stamp each lease with the kind the test
noted for its event (KindedQueue): what a store that keeps kinds hands a worker. Enqueueing
through Task.enqueue, with the kind stored, is tests/test_tasks_end_to_end.py's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

import fairq
import fairq.aio
import task_registry
from helpers import SHORT_SETTINGS, SUPPORT, check_invariants, cli


def lease(kind: str | None, event_id: str = "e1", body: Any = None) -> fairq.Lease:
    return fairq.Lease(event_id, None, 1, body if body is not None else {}, 1, 1, 1, "me", 100.0, kind=kind)


def job(kind: str | None, event_id: str = "e1", body: Any = None) -> fairq.Job:
    return fairq.Job(lease(kind, event_id, body), threading.Event())


class KindedQueue(fairq.Queue):
    """A Queue whose claimed and extended leases carry the kind noted in `kinds` for their event."""

    kinds: dict[str, str | None]

    def put(self, event_id: str, body: Any, kind: str | None, **kw: Any) -> None:
        self.enqueue(event_id, body, **kw)
        self.kinds[event_id] = kind

    def claim_many(self, *args: Any, **kw: Any) -> list[fairq.Lease]:
        return [self._kinded(x) for x in super().claim_many(*args, **kw)]

    def extend(self, lease: fairq.Lease, *args: Any, **kw: Any) -> fairq.Lease:
        return self._kinded(super().extend(lease, *args, **kw))

    def _kinded(self, x: fairq.Lease) -> fairq.Lease:
        return dataclasses.replace(x, kind=self.kinds.get(x.event_id))


@pytest.fixture
def kq(tmp_path: Path) -> Any:
    queue = KindedQueue(tmp_path / "kinded.db", **SHORT_SETTINGS)
    queue.kinds = {}
    yield queue
    queue.close()
    check_invariants(tmp_path / "kinded.db")


# -- the registry ----------------------------------------------------------------


class Mailer:
    @staticmethod
    def send(job: fairq.Job) -> str:
        return "sent"


def test_a_task_is_named_by_its_qualname_and_stays_callable_like_the_function() -> None:
    tasks = fairq.Tasks()

    @tasks.task()
    def send_email(job: fairq.Job) -> str:
        """Sends one email."""
        return f"to {job.body['to']}"

    method = tasks.task(Mailer.send)  # no parentheses: the same defaults
    assert isinstance(send_email, fairq.Task) and not send_email.is_async
    assert send_email.name == "test_a_task_is_named_by_its_qualname_and_stays_callable_like_the_function" \
                              ".<locals>.send_email"
    assert method.name == "Mailer.send"
    assert send_email(job("x", body={"to": "ann"})) == "to ann"
    assert send_email.__doc__ == "Sends one email." and send_email.__name__ == "send_email"
    assert (send_email.max_attempts, send_email.timeout, send_email.backoff) == (None, None, None)
    assert len(tasks) == 2 and list(tasks) == [send_email, method]
    assert tasks.get(send_email.name) is send_email and send_email.name in tasks
    assert tasks.get("nope") is None and "nope" not in tasks and 3 not in tasks


def test_an_async_task_is_async_and_calling_it_gives_the_coroutine() -> None:
    tasks = fairq.Tasks()

    @tasks.task("later", max_attempts=5, timeout=2.5, backoff=fairq.Backoff(base=1.0))
    async def later(job: fairq.Job) -> int:
        return 7

    assert later.is_async and isinstance(later, fairq.Task)
    assert asyncio.run(later(job("later"))) == 7
    assert (later.name, later.max_attempts, later.timeout, later.backoff) == ("later", 5, 2.5,
                                                                             fairq.Backoff(base=1.0))


def test_a_name_registered_twice_is_refused_and_the_first_task_stays() -> None:
    tasks = fairq.Tasks()
    first = tasks.task("send")(lambda job: 1)
    with pytest.raises(fairq.UsageError, match="'send' is registered already"):
        tasks.task("send")(lambda job: 2)
    assert len(tasks) == 1 and tasks.get("send") is first
    with pytest.raises(fairq.UsageError, match="is a task already"):
        tasks.task("other")(first)
    assert len(tasks) == 1


@pytest.mark.parametrize("options, field", [
    ({"name": 3}, "name"),
    ({"name": "  "}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": "a\nb"}, "name"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": True}, "max_attempts"),
    ({"max_attempts": "3"}, "max_attempts"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": -1.0}, "timeout"),
    ({"timeout": math.nan}, "timeout"),
    ({"backoff": {"base": 1}}, "backoff"),
])
def test_bad_task_options_are_refused_naming_the_option_and_nothing_is_registered(options, field) -> None:
    tasks = fairq.Tasks()
    with pytest.raises(fairq.InvalidInput) as info:
        tasks.task(**options)(lambda job: None)
    assert info.value.field == field
    assert len(tasks) == 0


def test_what_cannot_be_a_task_is_refused_naming_it() -> None:
    tasks = fairq.Tasks()
    with pytest.raises(fairq.InvalidInput) as info:
        tasks.task("x")(42)
    assert info.value.field == "fn"
    with pytest.raises(fairq.InvalidInput, match="cannot be called with one argument") as info:
        tasks.task("y")(lambda: None)
    assert info.value.field == "fn" and len(tasks) == 0
    assert tasks.task("z", max_attempts=1_000_000, timeout=0.001)(lambda job: None).max_attempts == 1_000_000


# -- dispatch --------------------------------------------------------------------


def test_dispatch_runs_the_task_the_jobs_kind_names_and_returns_its_value() -> None:
    assert task_registry.tasks.dispatch(job("add", body={"a": 2, "b": 3})) == 5
    assert task_registry.tasks.dispatch(job("note")) is None


def test_an_unknown_kind_gets_a_fail_decision_naming_it_or_a_release() -> None:
    tasks = task_registry.tasks
    decision = tasks.dispatch(job("send_sms"))
    assert isinstance(decision, fairq.Fail) and decision.reason == "unknown_kind: send_sms"
    none = tasks.dispatch(job(None))
    assert isinstance(none, fairq.Fail) and none.reason == "unknown_kind: (none)"
    assert isinstance(tasks.dispatch(job("send_sms"), unknown="release"), fairq.Release)
    assert tasks.dispatch(job("add", body={"a": 1, "b": 1}), unknown="release") == 2  # only unknown kinds
    for bad in ("drop", None, "", "RELEASE"):
        with pytest.raises(fairq.InvalidInput) as info:
            tasks.dispatch(job("add"), unknown=bad)
        assert info.value.field == "unknown"


def test_task_enqueue_asks_the_queue_for_the_tasks_kind_and_policy() -> None:
    tasks = fairq.Tasks()
    backoff = fairq.Backoff(base=0.5, factor=3.0, cap=10.0, jitter=False)
    send = tasks.task("send", max_attempts=4, timeout=9.0, backoff=backoff)(lambda job: None)
    plain = tasks.task("plain")(lambda job: None)
    calls = []

    class Recorder:
        def enqueue(self, *args: Any, **kw: Any) -> str:
            calls.append((args, kw))
            return "enqueued"

    assert send.enqueue(Recorder(), {"to": "ann"}, event_id="m1", flow="F", tenant="T", delay=2.0) == "enqueued"
    plain.enqueue(Recorder(), [1])
    assert calls == [
        (("m1", {"to": "ann"}), {"flow": "F", "tenant": "T", "delay": 2.0, "conn": None, "kind": "send",
                                 "max_attempts": 4, "timeout": 9.0, "backoff": backoff}),
        ((None, [1]), {"flow": None, "tenant": None, "delay": 0.0, "conn": None, "kind": "plain",
                       "max_attempts": None, "timeout": None, "backoff": None}),
    ]


def test_task_enqueue_on_an_async_queue_returns_its_awaitable() -> None:
    send = fairq.Tasks().task("send")(lambda job: None)

    class AsyncRecorder:
        async def enqueue(self, *args: Any, **kw: Any) -> tuple:
            return args[1], kw["kind"]

    pending = send.enqueue(AsyncRecorder(), {"n": 1})
    assert asyncio.iscoroutine(pending)
    assert asyncio.run(pending) == ({"n": 1}, "send")


def test_a_registry_of_module_level_tasks_pickles_to_the_same_tasks() -> None:
    again = pickle.loads(pickle.dumps(task_registry.tasks))
    assert [t.name for t in again] == ["add", "note", "refuse"]
    assert again.get("add") is task_registry.add  # a task travels by reference
    local = fairq.Tasks()
    local.task("inner")(lambda job: None)
    with pytest.raises(pickle.PicklingError, match="not defined at the top level"):
        pickle.dumps(local)


# -- fairq.Worker -----------------------------------------------------------------


def test_a_worker_runs_each_job_by_its_kind_and_quarantines_an_unknown_one(kq: KindedQueue, marks,
                                                                            monkeypatch) -> None:
    monkeypatch.setenv("FAIRQ_TEST_MARKS", str(marks))
    kq.put("a1", {"a": 1, "b": 2}, "add", flow="F")
    kq.put("n1", {}, "note", flow="G")
    kq.put("x1", {}, "send_sms", flow="H")
    kq.put("z1", {}, None, flow="I")
    kq.put("r1", {}, "refuse", flow="J")
    worker = fairq.Worker(kq, task_registry.tasks)
    counts = worker.run(until_idle=True, signals=False)
    assert sorted(p.name.split(".")[0] for p in marks.iterdir()) == ["add", "note"]
    assert kq.get("a1").state is fairq.State.ACKED and kq.get("n1").state is fairq.State.ACKED
    for event_id, reason in (("x1", "unknown_kind: send_sms"), ("z1", "unknown_kind: (none)"),
                             ("r1", "refused by the task")):
        info = kq.get(event_id)
        assert (info.state, info.reason, info.attempts) == (fairq.State.QUARANTINED, reason, 1), event_id
    assert counts["acked"] == 2 and counts["quarantined"] == 3


def test_with_unknown_release_an_unknown_job_is_given_back_unspent_and_until_idle_ends(kq: KindedQueue) -> None:
    kq.put("x1", {}, "send_sms", flow="H")
    kq.put("a1", {"a": 1, "b": 1}, "add", flow="F")
    worker = fairq.Worker(kq, task_registry.tasks, unknown="release", idle_min=0.01, idle_max=0.05)
    counts = worker.run(until_idle=True, signals=False)
    info = kq.get("x1")
    assert info.state is fairq.State.READY and info.attempts == 0 and info.reason is None
    assert kq.get("a1").state is fairq.State.ACKED
    # released when first met, then again after a1: met twice with no work between, the run is idle
    assert 1 <= counts["released"] <= 3 and counts["acked"] == 1 and counts["quarantined"] == 0


def test_a_worker_refuses_async_tasks_naming_them_an_empty_registry_and_a_bad_unknown(kq: KindedQueue) -> None:
    with pytest.raises(fairq.UsageError, match="these tasks are async: later; run them with fairq.aio.AsyncWorker"):
        fairq.Worker(kq, task_registry.mixed)  # the plain task "plain" is not named
    with pytest.raises(fairq.UsageError, match="holds no task"):
        fairq.Worker(kq, task_registry.empty)
    with pytest.raises(fairq.InvalidInput) as bad:
        fairq.Worker(kq, task_registry.tasks, unknown="skip")
    assert bad.value.field == "unknown"
    with pytest.raises(fairq.InvalidInput) as bad:
        fairq.Worker(kq, lambda job: None, unknown=None)  # type: ignore[arg-type]
    assert bad.value.field == "unknown"


def test_a_worker_with_processes_takes_a_module_level_registry_and_refuses_a_local_one(kq: KindedQueue) -> None:
    worker = fairq.Worker(kq, task_registry.tasks, processes=True, concurrency=2, unknown="release")
    assert worker.child_options()["unknown"] == "release"
    local = fairq.Tasks()
    local.task("inner")(lambda job: None)
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Worker(kq, local, processes=True, concurrency=2)
    assert info.value.field == "handler"


def test_a_handler_may_raise_release_to_give_its_event_back_unspent(kq: KindedQueue) -> None:
    kq.put("a", {}, None)

    def handler(job: fairq.Job) -> None:
        raise fairq.Release()

    [handled] = fairq.Worker(kq, handler).step()
    assert handled.outcome is fairq.Outcome.RELEASE and handled.settled.state is fairq.State.READY
    assert kq.get("a").attempts == 0


# -- fairq.aio.AsyncWorker ---------------------------------------------------------


def test_an_async_worker_runs_async_tasks_on_the_loop_and_plain_ones_on_its_threads(kq: KindedQueue) -> None:
    tasks = fairq.Tasks()
    threads: dict[str, str] = {}

    @tasks.task("plain")
    def plain(job: fairq.Job) -> None:
        threads["plain"] = threading.current_thread().name

    @tasks.task("later")
    async def later(job: fairq.Job) -> None:
        await asyncio.sleep(0)
        threads["later"] = threading.current_thread().name

    @tasks.task("returns_release")
    async def returns_release(job: fairq.Job) -> fairq.Release:
        return fairq.Release()

    for i, kind in enumerate(("plain", "later", "nope", None)):
        kq.put(f"e{i}", {}, kind, flow=f"F{i}")

    async def main() -> dict[str, int]:
        aq = fairq.aio.AsyncQueue(kq)
        worker = fairq.aio.AsyncWorker(aq, tasks, concurrency=2)
        return await worker.run(until_idle=True, signals=False)

    counts = asyncio.run(main())
    loop_thread = threading.current_thread().name
    assert threads["later"] == loop_thread and threads["plain"].startswith("fairq-task")
    assert [kq.get(f"e{i}").state for i in range(4)] == [fairq.State.ACKED, fairq.State.ACKED,
                                                         fairq.State.QUARANTINED, fairq.State.QUARANTINED]
    assert kq.get("e2").reason == "unknown_kind: nope" and kq.get("e3").reason == "unknown_kind: (none)"
    assert counts["acked"] == 2 and counts["quarantined"] == 2


def test_an_async_worker_releases_unknown_kinds_when_told_and_validates_unknown(kq: KindedQueue) -> None:
    kq.put("x", {}, "nope")
    aq = fairq.aio.AsyncQueue(kq)
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.aio.AsyncWorker(aq, task_registry.mixed, unknown="later")
    assert info.value.field == "unknown"
    with pytest.raises(fairq.UsageError, match="holds no task"):
        fairq.aio.AsyncWorker(aq, task_registry.empty)

    async def main() -> list[fairq.Handled]:
        return await fairq.aio.AsyncWorker(aq, task_registry.mixed, unknown="release").step()

    [handled] = asyncio.run(main())
    assert handled.outcome is fairq.Outcome.RELEASE and kq.get("x").state is fairq.State.READY
    assert kq.get("x").attempts == 0


# -- fairq work MODULE:TASKS (arguments; running one is tests/test_tasks_end_to_end.py's) ----------


def test_fairq_work_refuses_an_empty_registry_and_a_bad_unknown(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    done = cli("--db", db, "work", "task_registry:empty", "--until-idle", cwd=SUPPORT)
    assert done.returncode == 1 and "task_registry:empty" in done.stderr and "holds no task" in done.stderr
    done = cli("--db", db, "work", "task_registry:tasks", "--unknown", "drop", cwd=SUPPORT)
    assert done.returncode == 2 and "--unknown" in done.stderr and "release" in done.stderr
    done = cli("--db", db, "work", "task_registry:mixed", "--processes", cwd=SUPPORT)
    assert done.returncode == 2 and "holds async tasks" in done.stderr


def test_fairq_work_help_names_the_unknown_option(tmp_path: Path) -> None:
    text = " ".join(cli("--db", str(tmp_path / "q.db"), "work", "--help", cwd=tmp_path).stdout.split())
    assert "--unknown {quarantine,release}" in text and "unknown_kind: NAME" in text and "fairq.Tasks" in text
