"""A clock reset pulls back what was timed by the mistaken clock, not what a
true clock timed before the jump: a long delay given before the jump keeps
its ready time."""

from __future__ import annotations

WEEK = 7 * 86_400.0


def test_a_long_delay_given_before_the_jump_keeps_its_ready_time(make_queue) -> None:
    wall = [1000.0]
    q = make_queue(clock=lambda: wall[0])
    q.enqueue("weekly-report", {}, flow="R", delay=WEEK)  # ready at 1000 + a week, by a true clock
    wall[0] += 86_400  # the jump
    q.enqueue("delayed", {}, delay=30)  # timed by the mistaken clock: ready at 87_430
    wall[0] = 1001.0  # corrected
    done = q.reset_clock(reason="wall clock was a day ahead")
    assert done.waits == 1
    assert q.get("weekly-report").next_at == 1000.0 + WEEK
    assert q.get("delayed").next_at == 1031.0
    assert q.why_blocked("R").why == "delayed"
