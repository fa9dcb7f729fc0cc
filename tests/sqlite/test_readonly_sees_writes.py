"""A read-only opening sees what writers commit later, also when the folder is
one this user may not write (a service's folder read by an operator): only a
filesystem mounted read-only, which nothing can write, is read as an
immutable snapshot."""

from __future__ import annotations

import os

import fairq


def test_a_read_only_queue_in_a_folder_this_user_cannot_write_sees_later_commits(tmp_path, monkeypatch) -> None:
    path = tmp_path / "q.db"
    with fairq.Queue(path) as writer:
        writer.enqueue("e0", {}, flow="f")
    # The writer closed cleanly: no -wal file is left, as when a service is stopped.
    assert not os.path.exists(f"{path}-wal")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(tmp_path) else
                        real_access(p, mode, **kw))
    with fairq.Queue(path, readonly=True) as reader:
        assert reader.stats().counts["ready"] == 1
        with fairq.Queue(path) as writer:
            writer.enqueue_many([(f"e{i}", {}, "f") for i in range(1, 201)])
        assert reader.stats().counts["ready"] == 201
