"""Schema version 10 on PostgreSQL: an upgrade from version 9 keeps every
event as it was (no kind, the queue's policy) and claims it as before; the
upgraded queue stores kinds and each event's own policy, and has one
definition of each function whose arguments changed."""

from __future__ import annotations

import fairq
from fairq.stores.postgres import schema
from pgcheck import check_pg_invariants
from pgcluster import require_psycopg
from pgold import back_to

psycopg = require_psycopg()


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def test_an_upgrade_to_version_10_keeps_every_event_and_then_stores_kinds(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model", max_attempts=3, lease_seconds=5) as q:
        q.enqueue_many([("a1", {}, "A"), ("a2", {}, "A"), ("b1", {"n": 1}, "B", "T"), ("u1", {}, None)], now=0)
        leases = {lease.event_id: lease for lease in q.claim_many(3, now=1)}
        q.retry(leases["a1"], "later", now=1)
    back_to(pg_url, 9)
    # The functions as version 9 defined them (their arguments and rows; the bodies do not matter here).
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP FUNCTION fairq_enqueue(text[], text[], text[], bytea[], bigint[], bigint[], boolean, "
                     "bigint, boolean, integer, text[], text[], integer[], bigint[], text[])")
        conn.execute("DROP FUNCTION fairq_claim(integer, text, boolean, bigint, boolean, bigint, integer, integer)")
        conn.execute("CREATE FUNCTION fairq_enqueue(p_ids text[], p_flows text[], p_bodies text[], p_hashes bytea[], "
                     "p_delays bigint[], p_ats bigint[], p_model boolean, p_requested bigint, p_explicit boolean, "
                     "p_fold integer, p_tenants text[]) RETURNS TABLE (o_kind text, o_event_id text, o_flow text, "
                     "o_seq bigint, o_body text, o_hash bytea, o_stored bigint, o_tenant text, o_known boolean) "
                     "LANGUAGE sql AS 'SELECT NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::text, "
                     "NULL::bytea, NULL::bigint, NULL::text, NULL::boolean WHERE false'")
        conn.execute("CREATE FUNCTION fairq_claim(p_n integer, p_owner text, p_model boolean, p_requested bigint, "
                     "p_explicit boolean, p_lease_ms bigint, p_max_attempts integer, p_fold integer) "
                     "RETURNS TABLE (o_event_id text) LANGUAGE sql AS 'SELECT NULL::text WHERE false'")
    assert not rows(pg_url, "SELECT 1 FROM information_schema.columns WHERE table_name = 'event' "
                            "AND column_name = 'kind' AND table_schema = current_schema()")
    columns = ("id, event_id, flow_id, seq, body, state, generation, attempts, lifetime_attempts, next_at_ms, "
               "lease_until_ms, owner, reason, tenant_id")
    before = rows(pg_url, f"SELECT {columns} FROM event ORDER BY id")  # noqa: S608
    with fairq.Queue(pg_url, clock="model") as q:
        assert q.schema_version == schema.LATEST >= 10
        assert rows(pg_url, f"SELECT {columns} FROM event ORDER BY id") == before  # noqa: S608
        assert {(e.kind, e.max_attempts, e.timeout) for e in q.events()} == {(None, None, None)}
        # Each function whose arguments or rows changed has one definition.
        counts = dict(rows(pg_url, "SELECT proname, count(*) FROM pg_proc WHERE pronamespace = "
                                   "current_schema()::regnamespace AND proname IN "
                                   "('fairq_claim', 'fairq_extend', 'fairq_enqueue') GROUP BY proname"))
        assert counts == {"fairq_claim": 1, "fairq_extend": 1, "fairq_enqueue": 1}
        q.enqueue("k1", {}, kind="email", max_attempts=1, now=10)
        got = {lease.event_id: lease for lease in q.claim_many(10, now=10)}
        assert sorted(got) == ["a1", "b1", "k1", "u1"]  # a2 waits behind a1; the expired leases are taken over
        assert got["k1"].kind == "email" and got["a1"].kind is None
        assert q.retry(got["k1"], "no", now=10).state is fairq.State.QUARANTINED  # its own budget of 1
        assert q.retry(got["a1"], "no", now=10).state is fairq.State.READY  # the queue's budget of 3
    check_pg_invariants(pg_url)
