"""The operator statements use indexes: beside a large backlog with many
blocked flows (live leases, quarantined heads, paused flows) the plans of
discard, pause, resume and the counts stats reads (auto_explain, nested
statements included) show no sequential scan of the events or the heads, so
claimable_now costs what the claimable heads cost, not what the backlog does."""

from __future__ import annotations

import re
from typing import Any

import fairq
from fairq.stores.postgres import operators
from pgcluster import require_psycopg

psycopg = require_psycopg()


def test_discard_pause_and_the_counts_read_no_event_or_head_sequentially(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model", lease_seconds=3600) as q:
        for start in range(0, 3000, 500):
            q.enqueue_many([{"event_id": f"e{f}-{i}", "body": {"n": i}, "flow": f"f{f:04}",
                             "tenant": None if f % 3 else f"t{f % 30}"}
                            for f in range(start, start + 500) for i in range(10)], now=0)
        for _ in range(5):
            q.claim_many(500, now=0)  # live leases
        q.settle_many([(lease, "fail", "bad") for lease in q.claim_many(300, now=0)], now=0)
        for f in range(2700, 3000):
            q.pause(f"f{f:04}", reason="hold", now=0)
        quarantined = q.events(state="quarantined", limit=1)[0]
        ready = q.claim(now=0)
        assert ready is not None
        q.release(ready, now=0)
        generation = q.get(ready.event_id).generation
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    found: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: found.append(str(diag.message_primary)))
        for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                        "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_level = 'notice'",
                        "SET client_min_messages = 'notice'"):
            conn.execute(setting)
        call: dict[str, Any] = {"model": True, "requested": 1000, "explicit": False, "fold": 0, "actor": "ops"}
        # A head that is due, an event behind a head, a quarantined head.
        behind = ready.event_id.rsplit("-", 1)[0] + "-5"
        done = conn.execute(operators._DISCARD, {
            **call, "ids": [ready.event_id, behind, quarantined.event_id],
            "gens": [generation, 0, quarantined.generation], "reason": "cleanup"}).fetchall()
        assert [r[0] for r in done] == ["discarded"] * 3, done
        for paused in (True, False, True):
            (changed,) = conn.execute(operators._SET_PAUSED, {**call, "flow": "f0001", "paused": paused,
                                                              "reason": "hold"}).fetchall()
            assert changed[0] is True
        claimable, blocked = operators.read_counts(conn, 1000)
        conn.execute("SET auto_explain.log_min_duration = -1")
        recount = conn.execute("SELECT count(*) FROM flow AS f JOIN head AS h ON h.flow_id = f.flow_id "
                               "JOIN event AS e ON e.id = h.event_pk "
                               "WHERE f.paused OR e.state = 'quarantined'").fetchone()[0]
        assert blocked == recount > 300  # quarantined heads (one discarded), paused flows (one more)
        assert claimable > 0
    assert any("fairq_discard" in p for p in found) and any("fairq_set_paused" in p for p in found)
    assert any("head_waiting" in p or "head_rotation" in p for p in found), "\n\n".join(found)
    scans = [p for p in found if re.search(r"Seq Scan on (event|head)\b", p)]  # not event_result_waiter, empty
    assert not scans, "\n\n".join(scans)
