-- fairq's server-side tenant rules (since schema version 7), applied with
-- verbs.sql and enqueue.sql by every upgrade (fairq.stores.postgres.schema.FUNCTIONS).
-- Each is fairq.kernel.tenants' rule of the same name, in SQL;
-- tests/postgres/test_pg_tenant_rules_sql.py runs each beside it.
-- fairq_tenants_touched is the one place a tenant row changes when its events
-- move (counts and holds): fairq_claim, fairq_settle, fairq_enqueue and the
-- Python paths (claim.py, settle.py, enqueue.py) all call it.

-- tenants.tenant_step: the tenant's new pass and the queue's vtime and tail
-- (o_t_*), the claimed head's new pass and the tenant's own vtime and tail (o_f_*).
CREATE OR REPLACE FUNCTION fairq_tenant_step(p_tenant_pass bigint, p_tenant_weight integer, p_flow_pass bigint,
                                             p_flow_weight integer, p_vtime bigint, p_tail bigint,
                                             p_tenant_vtime bigint, p_tenant_tail bigint,
                                             OUT o_t_pass bigint, OUT o_t_vtime bigint, OUT o_t_tail bigint,
                                             OUT o_f_pass bigint, OUT o_f_vtime bigint, OUT o_f_tail bigint)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    o_t_vtime := greatest(p_tenant_pass, p_vtime);
    o_t_pass := o_t_vtime + 720720 / p_tenant_weight;
    o_t_tail := greatest(o_t_pass, p_tail);
    o_f_vtime := greatest(p_flow_pass, p_tenant_vtime);
    o_f_pass := o_f_vtime + 720720 / p_flow_weight;
    o_f_tail := greatest(o_f_pass, p_tenant_tail);
END
$$;

-- Bucket.level: the milli-tokens held at p_now (a missing bucket is full).
CREATE OR REPLACE FUNCTION fairq_bucket_level(p_tokens bigint, p_at bigint, p_now bigint, p_rate integer,
                                              p_burst integer)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_rate = 0 OR p_tokens IS NULL THEN p_burst::bigint * 1000
                ELSE least(p_burst::bigint * 1000 + least(p_rate, 1000) - 1,
                           p_tokens + least(greatest(p_now - p_at, 0),
                                            (p_burst::bigint * 1000 + least(p_rate, 1000) - 1 + p_rate - 1) / p_rate)
                                      * p_rate) END
$$;

-- Bucket.ready_at: the earliest time, no earlier than p_now, a whole token is there.
CREATE OR REPLACE FUNCTION fairq_bucket_ready_at(p_tokens bigint, p_at bigint, p_now bigint, p_rate integer,
                                                 p_burst integer)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_rate = 0 OR l.held >= 1000 THEN p_now
                ELSE greatest(p_now, coalesce(p_at, p_now)) + (1000 - l.held + p_rate - 1) / p_rate END
    FROM (SELECT fairq_bucket_level(p_tokens, p_at, p_now, p_rate, p_burst) AS held) AS l
$$;

-- The advisory lock key of a tenant: settles that free its slots hold it
-- shared; a claim about to hold it at its cap takes it exclusively.
CREATE OR REPLACE FUNCTION fairq_tenant_key(p_tenant bigint) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT (p_tenant % 2147483647)::integer
$$;

-- What a transaction's moves do to tenant rows: p_tenants[i] gets
-- p_runnable[i] more runnable heads (exact counts), and each tenant in
-- p_freed had an event leave inflight: a slot may be free, so a hold ends at
-- once (no write when none is held). Locks: the freed tenants' advisory keys
-- shared (in key order; a claim holding one of them at its cap waits for
-- this transaction to end, then counts again), then the tenant rows, in
-- tenant_id order, last of every lock this transaction takes.
CREATE OR REPLACE FUNCTION fairq_tenants_touched(p_tenants bigint[], p_runnable integer[], p_freed bigint[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF coalesce(cardinality(p_freed), 0) > 0 THEN
        PERFORM pg_advisory_xact_lock_shared(26229, s.k)
        FROM (SELECT DISTINCT fairq_tenant_key(t) AS k FROM unnest(p_freed) AS t ORDER BY 1) AS s;
    END IF;
    IF coalesce(cardinality(p_tenants), 0) = 0 AND coalesce(cardinality(p_freed), 0) = 0 THEN
        RETURN;
    END IF;
    -- Rows counted or held, locked in tenant_id order; a tenant neither
    -- counted nor held is not written.
    WITH c AS (SELECT c.t, sum(c.n)::integer AS n FROM unnest(p_tenants, p_runnable) AS c(t, n)
               WHERE c.t IS NOT NULL GROUP BY c.t HAVING sum(c.n) <> 0),
         f AS (SELECT DISTINCT x AS t FROM unnest(p_freed) AS x),
         locked AS (SELECT t.tenant_id, coalesce(c.n, 0) AS n, f.t IS NOT NULL AS freed FROM tenant AS t
                    LEFT JOIN c ON c.t = t.tenant_id LEFT JOIN f ON f.t = t.tenant_id
                    WHERE t.tenant_id = ANY(ARRAY(SELECT c.t FROM c))
                          OR (t.tenant_id = ANY(ARRAY(SELECT f.t FROM f)) AND t.held_until_ms > 0)
                    ORDER BY t.tenant_id FOR NO KEY UPDATE OF t)
    UPDATE tenant AS t SET runnable = t.runnable + locked.n,
        held_until_ms = CASE WHEN locked.freed THEN 0 ELSE t.held_until_ms END
    FROM locked WHERE t.tenant_id = locked.tenant_id;
END
$$;
