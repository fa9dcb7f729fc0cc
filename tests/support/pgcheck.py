"""The PostgreSQL store's invariants recounted from its rows, after a test:
what the store keeps incrementally (head rows, dispatch times, runnable
flags, sharded counters) equals what a full recount derives."""

from __future__ import annotations

from typing import Any

#: The states a flow passes over (its head is its lowest event in neither).
FINAL = ("acked", "discarded")


def check_pg_invariants(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('fairq_schema')").fetchone()[0] is None:
            return
        _check(conn)


def _check(conn: Any) -> None:
    rows = lambda sql, *p: conn.execute(sql, p).fetchall()  # noqa: E731
    now = rows("SELECT now_ms FROM queue_clock")[0][0]
    # Within a flow: acked events come before every event that is not final
    # (discarded ones may be anywhere), seqs have no gaps (purge removes a
    # prefix), next_seq follows the last.
    for flow_id, next_seq in rows("SELECT flow_id, next_seq FROM flow"):
        events = rows("SELECT seq, state FROM event WHERE flow_id = %s ORDER BY seq", flow_id)
        seqs = [s for s, _ in events]
        first = next_seq - len(seqs)
        assert seqs == list(range(first, next_seq)), f"flow {flow_id}: seqs {seqs}, next {next_seq}"
        states = [st for _, st in events]
        k = next((i for i, st in enumerate(states) if st not in FINAL), len(states))
        assert all(st != "acked" for st in states[k:]), f"flow {flow_id}: {states}"
        purged = [r[0] for r in rows("SELECT seq FROM tombstone WHERE flow_id = %s", flow_id)]
        assert all(s < first for s in purged), f"flow {flow_id}: tombstones {purged}"
    # Exactly the heads (a flow's lowest event that is not final) have a head
    # row, with the dispatch time their state gives.
    heads = {r[0] for r in rows(
        "SELECT e.id FROM event e WHERE e.state NOT IN ('acked', 'discarded') AND (e.flow_id IS NULL OR NOT EXISTS "
        "(SELECT 1 FROM event p WHERE p.flow_id = e.flow_id AND p.seq < e.seq "
        "AND p.state NOT IN ('acked', 'discarded')))")}
    placed = {r[0] for r in rows("SELECT event_pk FROM head")}
    assert placed == heads, f"heads {sorted(heads)}, head rows {sorted(placed)}"
    wrong = rows("SELECT h.event_pk FROM head h JOIN event e ON e.id = h.event_pk WHERE "
                 "h.dispatch_ms IS DISTINCT FROM (CASE e.state WHEN 'ready' THEN e.next_at_ms "
                 "WHEN 'inflight' THEN e.lease_until_ms END) OR (h.flow_id IS DISTINCT FROM e.flow_id)")
    assert not wrong, f"head rows with a wrong dispatch time or flow: {wrong}"
    early = rows("SELECT event_pk FROM head WHERE runnable AND dispatch_ms > %s", now)
    assert not early or now == 0, f"runnable before due: {early}"
    kept = dict(rows("SELECT name, sum(n)::bigint FROM counter GROUP BY name"))
    actual = dict(rows("SELECT state, count(*) FROM event GROUP BY state"))
    for state in ("ready", "inflight", "acked", "quarantined", "discarded"):
        assert kept.get(state, 0) == actual.get(state, 0), f"count {state}={kept.get(state, 0)}, recounted {actual.get(state, 0)}"
    tombstones = rows("SELECT count(*) FROM tombstone")[0][0]
    assert kept.get("total_tombstones", 0) == tombstones
    both = rows("SELECT count(*) FROM tombstone JOIN event USING (event_id)")[0][0]
    assert both == 0, "an event id is both stored and tombstoned"
    vtime, tail = rows("SELECT max(vtime), max(tail) FROM rotation")[0]
    assert tail >= vtime
    if rows("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'head' AND column_name = 'paused'")[0][0]:
        _check_pauses(rows)
    if rows("SELECT to_regclass('tenant') IS NOT NULL")[0][0]:
        _check_tenants(rows)


def _check_pauses(rows: Any) -> None:
    """A head is paused exactly when its flow is, and a paused head is never
    runnable; a flow's pause has its time while paused, none after."""
    wrong = rows("SELECT h.event_pk FROM head AS h LEFT JOIN flow AS f ON f.flow_id = h.flow_id "
                 "WHERE h.paused IS DISTINCT FROM coalesce(f.paused, false) OR (h.paused AND h.runnable)")
    assert not wrong, f"head rows whose pause is not their flow's: {wrong}"
    flows = rows("SELECT name FROM flow WHERE paused <> (paused_ms IS NOT NULL)")
    assert not flows, f"flows with a pause time that does not match: {flows}"
    skipped = rows("SELECT f.name, f.skipped, (SELECT count(*) FROM event AS d WHERE d.flow_id = f.flow_id "
                   "AND d.state = 'discarded' AND d.seq > coalesce((SELECT e.seq FROM head AS h JOIN event AS e "
                   "ON e.id = h.event_pk WHERE h.flow_id = f.flow_id), f.next_seq)) AS n FROM flow AS f")
    wrong = [r for r in skipped if r[1] != r[2]]
    assert not wrong, f"flows' discarded events behind the head (name, kept, recounted): {wrong}"


def _check_tenants(rows: Any) -> None:
    """Each tenant's runnable count is the number of its runnable heads; a
    head's tenant is its event's, and a named flow's events have its tenant."""
    wrong = rows("SELECT t.name, t.runnable, count(h.event_pk) FROM tenant AS t "
                 "LEFT JOIN head AS h ON h.tenant_id = t.tenant_id AND h.runnable "
                 "GROUP BY t.tenant_id HAVING t.runnable <> count(h.event_pk)")
    assert not wrong, f"tenant runnable counts (name, kept, recounted): {wrong}"
    heads = rows("SELECT h.event_pk FROM head AS h JOIN event AS e ON e.id = h.event_pk "
                 "WHERE h.tenant_id IS DISTINCT FROM e.tenant_id")
    assert not heads, f"head rows with another tenant than their event's: {heads}"
    events = rows("SELECT e.event_id FROM event AS e JOIN flow AS f ON f.flow_id = e.flow_id "
                  "WHERE e.tenant_id IS DISTINCT FROM f.tenant_id")
    assert not events, f"events with another tenant than their flow's: {events}"
