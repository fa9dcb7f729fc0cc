"""Changing some backoff fields merges them with the backoff stored at the moment of the
write, so two changes of different fields made at the same time both survive."""

from __future__ import annotations

import pytest

import fairq
from fairq.api.configuration import QueueConfig
from fairq.cli import main

SLOW = fairq.Backoff(base=4.0, factor=3.0, cap=50.0, jitter=False)


def test_two_policy_set_commands_changing_different_backoff_fields_at_once_both_survive(
        db_path, monkeypatch, capsys) -> None:
    """The second command's whole write lands between the first one's start and its write."""
    fairq.Queue(db_path, backoff=SLOW).close()
    write = QueueConfig.set_policy
    interleaved = []

    def other_command_first(self, **kw):
        if not interleaved:
            interleaved.append(True)
            assert main(["--db", str(db_path), "policy", "set", "--backoff-base", "5",
                         "--reason", "the other operator"]) == 0
        return write(self, **kw)

    monkeypatch.setattr(QueueConfig, "set_policy", other_command_first)
    assert main(["--db", str(db_path), "policy", "set", "--backoff-cap", "20", "--reason", "shorter waits"]) == 0
    assert interleaved
    monkeypatch.undo()
    with fairq.Queue(db_path) as q:
        assert q.backoff == fairq.Backoff(base=5.0, factor=3.0, cap=20.0, jitter=False)
        assert q.policy().version == 3
        assert [a.reason for a in q.audit()] == ["the other operator", "shorter waits"]


def test_set_policy_with_a_mapping_changes_only_those_backoff_fields(make_queue) -> None:
    q = make_queue(backoff=SLOW)
    other = make_queue(backoff=None)
    other.set_policy(backoff=fairq.Backoff(base=7.0, factor=3.0, cap=50.0, jitter=False), reason="first")
    done = q.set_policy(backoff={"cap": 9.0, "jitter": True}, reason="second")
    assert done.backoff == fairq.Backoff(base=7.0, factor=3.0, cap=9.0, jitter=True)


@pytest.mark.parametrize("changes, field", [
    ({"ceiling": 3.0}, "backoff.ceiling"),
    ({"factor": 0.5}, "backoff.factor"),
    ({"jitter": "yes"}, "backoff.jitter"),
    ({}, "policy"),
])
def test_set_policy_refuses_a_bad_backoff_mapping_and_writes_nothing(make_queue, changes, field) -> None:
    q = make_queue(backoff=SLOW)
    with pytest.raises(fairq.InvalidInput) as refused:
        q.set_policy(backoff=changes, reason="bad")
    assert refused.value.field == field
    assert q.policy().version == 1 and q.audit() == []
