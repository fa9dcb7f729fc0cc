"""The retry policy belongs to the queue's file: every process that opens it
decides an event's fate by the same max_attempts, backoff and lease, an open
that names different values is refused, and a change is one audited call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import fairq
from helpers import ROOT

SLOW = fairq.Backoff(base=4.0, factor=3.0, cap=50.0, jitter=False)
SRC = str(ROOT / "src")


def test_a_reopen_without_arguments_uses_the_stored_policy(store, target) -> None:
    store.open(target, max_attempts=2, backoff=SLOW, lease_seconds=7).close()
    with store.open(target) as q:
        assert q.policy() == fairq.Policy(max_attempts=2, backoff=SLOW, lease_seconds=7.0)
        assert (q.max_attempts, q.backoff, q.lease_seconds) == (2, SLOW, 7.0)
        q.enqueue("e", {}, now=0)
        lease = q.claim(now=0)
        assert lease.lease_until == 7.0
        assert q.retry(lease, "flaky", now=1).next_at == 1 + 4.0
        assert q.retry(q.claim(now=5), "flaky", now=5).state is fairq.State.QUARANTINED


def test_a_new_file_opened_without_arguments_stores_the_defaults(store, target) -> None:
    with store.open(target) as q:
        assert q.policy() == fairq.Policy(max_attempts=5, backoff=fairq.Backoff(), lease_seconds=30.0)
        assert q.policy().version == 1


@pytest.mark.parametrize("field, value", [
    ("max_attempts", 9), ("backoff", fairq.Backoff(base=1.5)), ("lease_seconds", 31),
])
def test_an_explicit_value_that_differs_from_the_stored_one_is_refused_and_writes_nothing(
        store, target, field, value) -> None:
    store.open(target, max_attempts=2, backoff=SLOW, lease_seconds=7).close()
    before = store.snapshot(target)
    with pytest.raises(fairq.PolicyMismatch) as caught:
        store.open(target, **{field: value})
    assert (caught.value.field, caught.value.given) == (field, value)
    assert caught.value.stored == {"max_attempts": 2, "backoff": SLOW, "lease_seconds": 7.0}[field]
    assert field in str(caught.value) and "fairq policy set" in str(caught.value)
    assert store.snapshot(target) == before


def test_explicit_values_equal_to_the_stored_ones_are_accepted(store, target) -> None:
    store.open(target, max_attempts=2, backoff=SLOW, lease_seconds=7).close()
    with store.open(target, max_attempts=2, backoff=fairq.Backoff(4, 3, 50, False), lease_seconds=7.0) as q:
        assert q.policy().max_attempts == 2


def test_set_policy_is_audited_and_seen_by_another_open_queue_on_its_next_call(store, target) -> None:
    with store.open(target, max_attempts=3) as first, store.open(target) as second:
        second.enqueue("e", {}, now=0)
        assert second.claim(now=0).lease_until == 30.0
        done = first.set_policy(max_attempts=1, lease_seconds=12, reason="stop hammering", actor="ops")
        assert done == fairq.Policy(max_attempts=1, backoff=fairq.Backoff(), lease_seconds=12.0)
        assert done.version == 2
        lease = second.claim(now=31)  # the expired lease's claim; the new budget is spent by it
        assert lease is None and second.get("e").state is fairq.State.QUARANTINED
        second.enqueue("f", {}, now=31)
        assert second.claim(now=31).lease_until == 31 + 12.0
        (row,) = [a for a in second.audit() if a.action == "policy_set"]
        assert (row.event_id, row.reason, row.actor) == ("", "stop hammering", "ops")
        assert (row.detail["from"]["max_attempts"], row.detail["to"]["max_attempts"]) == (3, 1)
        assert (row.detail["from"]["version"], row.detail["to"]["lease_seconds"]) == (1, 12.0)


def test_a_settle_uses_the_backoff_stored_at_its_call(store, target) -> None:
    with store.open(target) as first, store.open(target) as second:
        second.enqueue("e", {}, now=0)
        lease = second.claim(now=0)
        first.set_policy(backoff=SLOW, reason="slower retries")
        assert second.retry(lease, "flaky", now=1).next_at == 1 + SLOW.base


def test_a_change_that_changes_nothing_writes_no_row(store, target) -> None:
    with store.open(target, max_attempts=4) as q:
        assert q.set_policy(max_attempts=4, reason="no-op").version == 1
        assert q.audit() == []


@pytest.mark.parametrize("kwargs, field", [
    ({"reason": "why"}, "policy"),
    ({"max_attempts": 0, "reason": "why"}, "max_attempts"),
    ({"lease_seconds": 0.0001, "reason": "why"}, "lease_seconds"),
    ({"backoff": 3, "reason": "why"}, "backoff"),
    ({"max_attempts": 2, "reason": " "}, "reason"),
])
def test_a_bad_policy_change_is_refused_naming_the_field_and_writes_nothing(store, target, kwargs, field) -> None:
    with store.open(target) as q:
        with pytest.raises(fairq.InvalidInput) as caught:
            q.set_policy(**kwargs)
        assert caught.value.field == field
        assert q.policy().version == 1 and q.audit() == []


def test_settings_reopen_the_file_under_its_stored_policy_after_a_change(store, target) -> None:
    with store.open(target, max_attempts=2) as q:
        q.set_policy(max_attempts=6, reason="more patience")
        assert "max_attempts" not in q.settings()
        with store.open(target, **q.settings()) as again:
            assert again.max_attempts == 6


# -- two real processes ----------------------------------------------------------

OPENER = textwrap.dedent("""
    import json, sys
    import fairq
    path, kwargs = sys.argv[1], json.loads(sys.argv[2])
    try:
        q = fairq.Queue(path, **kwargs)
    except fairq.PolicyMismatch as exc:
        print(json.dumps({"refused": exc.field, "stored": exc.stored, "given": exc.given}))
        sys.exit(0)
    claims = 0
    while (lease := q.claim(now=0)) is not None:   # retries at once: delay=0
        claims += 1
        q.retry(lease, "still failing", delay=0, now=0)
    print(json.dumps({"claims": claims, "max_attempts": q.max_attempts}))
""")


def run_opener(path: object, **kwargs: object) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", OPENER, str(path), json.dumps(kwargs)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_processes_with_different_arguments_see_one_policy_and_the_budget_holds(store, target) -> None:
    with store.open(target, max_attempts=3) as q:
        q.enqueue("e", {}, now=0)
    # A process that names another budget is refused before it claims anything.
    assert run_opener(target, max_attempts=10, **store.DEFAULTS) == {"refused": "max_attempts", "stored": 3, "given": 10}
    # One that names none uses the stored budget: the event is quarantined
    # after exactly 3 claims, whatever the process would have chosen.
    assert run_opener(target, **store.DEFAULTS) == {"claims": 3, "max_attempts": 3}
    with store.open(target) as q:
        info = q.get("e")
        assert (info.state, info.attempts, info.lifetime_attempts) == (fairq.State.QUARANTINED, 3, 3)


def test_a_change_made_by_another_process_is_the_budget_from_then_on(store, target) -> None:
    with store.open(target, max_attempts=10) as q:
        q.enqueue("e", {}, now=0)
        changer = subprocess.run(
            [sys.executable, "-m", "fairq", "--db", str(target), "policy", "set", "--max-attempts", "2",
             "--reason", "fail fast", "--actor", "ops"],
            capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": SRC})
        assert changer.returncode == 0, changer.stderr
        claims = 0
        while (lease := q.claim(now=0)) is not None:
            claims += 1
            q.retry(lease, "still failing", delay=0, now=0)
        assert claims == 2 and q.get("e").state is fairq.State.QUARANTINED


CREATOR = textwrap.dedent("""
    import json, sys, time
    import fairq
    path, n, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    time.sleep(max(0.0, start - time.time()))   # all start together
    try:
        fairq.Queue(path, max_attempts=n, busy_timeout=30).close()
        print(json.dumps({"opened": n}))
    except fairq.PolicyMismatch as exc:
        print(json.dumps({"refused": n, "stored": exc.stored}))
""")


def test_processes_racing_to_create_a_file_with_different_budgets_leave_exactly_one(store) -> None:
    path, start = store.target("new"), time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, "-c", CREATOR, str(path), str(n), str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": SRC})
             for n in range(1, 7)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    (winner,) = [a["opened"] for a in answers if "opened" in a]
    assert all(a["stored"] == winner for a in answers if "refused" in a)
    with store.open(path, clock=None) as q:  # the openers' clock (the default): the one the queue stores
        assert q.policy().max_attempts == winner and q.policy().version == 1
