"""An ack of a flow's last event and an enqueue into that flow, at once, on
two connections: one of them always sees the other, so the new event becomes
the flow's head and is claimable (the flow row serialises them).

Interleaved deterministically: the ack stops after it has looked for the
flow's next event and before it commits (a hook); the enqueue then runs in
another thread, and the ack goes on once the enqueue waits for the flow's
row lock (or has finished)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import fairq
from fairq.postgres.txn import TxnCore
from pgcheck import check_pg_invariants
from pgsessions import interleave


def test_an_enqueue_racing_the_ack_of_its_flows_last_event_becomes_the_head(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    acker = fairq.Queue(f"{pg_url}&application_name=acker")
    sender = fairq.Queue(f"{pg_url}&application_name=sender")
    paused, go = threading.Event(), threading.Event()
    real = TxnCore.execute

    def execute(self: TxnCore, sql: str, params: Any = None) -> Any:
        result = real(self, sql, params)
        if threading.current_thread().name == "acker" and sql.startswith("INSERT INTO head"):
            paused.set()  # the ack found no next event; it has not committed
            go.wait(60)  # only stops a hang
        return result

    try:
        acker.enqueue("f1", {}, flow="F")
        lease = acker.claim()
        monkeypatch.setattr(TxnCore, "execute", execute)
        ta = threading.Thread(target=lambda: acker.ack(lease), name="acker")
        tb = threading.Thread(target=lambda: sender.enqueue("f2", {}, flow="F"), name="sender")
        interleave(ta, tb, paused=paused, go=go, url=pg_url, second_session="sender")
        monkeypatch.undo()
        assert acker.get("f1").state is fairq.State.ACKED
        follow = acker.claim()
        assert follow is not None and follow.event_id == "f2"  # F's new event is its head
    finally:
        go.set()
        acker.close()
        sender.close()
    check_pg_invariants(pg_url)
