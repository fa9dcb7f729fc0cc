"""why_blocked: one answer for why a flow is not moving (what `fairq explain` prints)."""

from __future__ import annotations

import shlex

import fairq
from helpers import cli


def test_an_unknown_flow_and_an_empty_flow_say_so(q: fairq.Queue) -> None:
    assert q.why_blocked("nope", now=0).why == "unknown"
    q.enqueue("a", {}, flow="A", now=0)
    q.ack(q.claim(now=0), now=0)
    q.set_weight("W", 2)  # a flow with no event yet
    assert q.why_blocked("A", now=0).why == "empty"
    assert q.why_blocked("W", now=0).why == "empty"
    assert str(q.why_blocked("A", now=0)) == "flow 'A' is empty: every event in it is acked"


def test_a_claimable_head_is_not_blocked_and_counts_its_backlog(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("a3", {}, "A")], now=0)
    answer = q.why_blocked("A", now=1)
    assert (answer.why, answer.event_id, answer.seq, answer.backlog) == ("ready", "a1", 1, 3)
    assert "claimable now" in str(answer) and "2 more wait behind it" in str(answer)


def test_a_delayed_head_waits_until_its_time(q: fairq.Queue) -> None:
    q.enqueue("a1", {}, flow="A", delay=60, now=0)
    answer = q.why_blocked("A", now=15)
    assert (answer.why, answer.until) == ("delayed", 60.0)
    assert "delayed until 1970-01-01T00:01:00.000Z (in 45.0 s)" in str(answer)


def test_a_retried_head_is_backing_off_with_its_reason(q: fairq.Queue) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    q.retry(q.claim(now=0), "payment service down", now=0)  # the fixture's short backoff: 2 s
    answer = q.why_blocked("A", now=1)
    assert (answer.why, answer.until, answer.reason, answer.attempts) == (
        "backing_off", 2.0, "payment service down", 1)
    assert "failed attempt 1 (payment service down) and is retried at" in str(answer)


def test_a_leased_head_names_its_owner_and_lease_end(q: fairq.Queue) -> None:
    q.enqueue("a1", {}, flow="A", now=0)
    q.claim(owner="worker-7", now=0)  # lease 5 s
    answer = q.why_blocked("A", now=2)
    assert (answer.why, answer.owner, answer.until) == ("leased", "worker-7", 5.0)
    assert "leased to worker-7 until 1970-01-01T00:00:05.000Z (in 3.0 s)" in str(answer)
    expired = q.why_blocked("A", now=9)
    assert expired.why == "expired"
    assert "ended at 1970-01-01T00:00:05.000Z (4.0 s ago); the next claim takes it over" in str(expired)


def test_a_quarantined_head_gives_its_reason_and_the_exact_redrive_and_discard_commands(q: fairq.Queue,
                                                                                       target) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    q.fail(q.claim(now=0), "unsupported_delta", now=0)
    answer = q.why_blocked("A", now=1)
    assert (answer.why, answer.reason, answer.generation, answer.backlog) == (
        "quarantined", "unsupported_delta", 1, 2)
    assert answer.redrive == (f"fairq --db {shlex.quote(str(target))} redrive a1 --expected-generation 1 "
                              "--reason '<why it is safe to run again>'")
    assert answer.discard == (f"fairq --db {shlex.quote(str(target))} discard a1 --expected-generation 1 "
                              "--reason '<why it must never run>'")
    assert str(answer).endswith(f"Two ways on. Run it again: {answer.redrive}; or skip it on the record "
                                f"(it becomes discarded and the flow moves on): {answer.discard}")
    assert "quarantined (unsupported_delta); 1 more wait behind it" in str(answer)
    assert q.flows()[0].blocked.discard == answer.discard


def test_explain_on_the_command_line_names_both_ways_on_with_the_current_generation(q: fairq.Queue, target,
                                                                                     tmp_path) -> None:
    q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A")], now=0)
    q.fail(q.claim(now=0), "unsupported_delta", now=0)
    q.redrive("a1", expected_generation=1, reason="fixed, try again", now=1)
    q.fail(q.claim(now=1), "still unsupported", now=1)  # quarantined again, at generation 3
    done = cli("--db", str(target), "explain", "A", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where = shlex.quote(str(target))
    assert "head a1 (seq 1) is quarantined (still unsupported)" in done.stdout
    assert (f"Run it again: fairq --db {where} redrive a1 --expected-generation 3 "
            "--reason '<why it is safe to run again>'; or skip it on the record") in done.stdout
    assert done.stdout.rstrip().endswith(f"fairq --db {where} discard a1 --expected-generation 3 "
                                         "--reason '<why it must never run>'")


def test_the_head_is_found_past_a_long_acked_and_purged_prefix(q: fairq.Queue) -> None:
    q.enqueue_many([(f"a{i}", {}, "A") for i in range(1, 101)], now=0)
    for _ in range(70):
        q.ack(q.claim(now=0), now=0)
    q.purge(acked_before=1, now=1, chunk=16)
    for _ in range(7):
        q.ack(q.claim(now=2), now=2)
    answer = q.why_blocked("A", now=3)
    assert (answer.event_id, answer.seq, answer.backlog) == ("a78", 78, 23)


