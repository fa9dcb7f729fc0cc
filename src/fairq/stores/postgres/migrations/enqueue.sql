-- enqueue as one server-side function (since schema version 5), so an
-- enqueue or enqueue_many is one statement (its own transaction, one round
-- trip), as verbs.sql makes claim, settle and extend. Applied after
-- verbs.sql by every upgrade, as that file is.
--
-- The rules it evaluates are fairq.kernel.rules' and fairq.kernel.rows': whether a repeat
-- matches what is stored (fairq_repeats), where each new event goes
-- (fairq_placed) and where a new head joins the rotation (verbs.sql's
-- fairq_join_pass); tests/postgres/test_pg_rules_sql.py runs each beside its
-- Python rule over thousands of random inputs. The bookkeeping is verbs.sql's
-- fairq_bookkeep.

-- rules.check_repeat as a verdict: an enqueue of an id already known (its
-- flow and stored body, or the body hash its tombstone keeps) repeats it
-- exactly. p_hash is rules.body_hash(p_body), made in Python.
CREATE OR REPLACE FUNCTION fairq_repeats(p_flow text, p_body text, p_hash bytea, p_stored_flow text,
                                         p_stored_body text, p_stored_hash bytea)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT p_stored_flow IS NOT DISTINCT FROM p_flow
           AND CASE WHEN p_stored_body IS NOT NULL THEN p_stored_body = p_body ELSE p_stored_hash = p_hash END
$$;

-- rows.placed: each new event's place, in batch order (o_i counts from 1):
-- its seq (its flow's first new seq, counted on through the batch; 1 in a
-- flow of its own), whether it becomes its flow's head (the batch's first in
-- a flow without one; always in a flow of its own), and when it is ready
-- (its own time, else now plus its delay). The flows: name, first new seq,
-- whether it has a head already.
CREATE OR REPLACE FUNCTION fairq_placed(p_flows text[], p_delays bigint[], p_ats bigint[], p_now bigint,
                                        p_flow_names text[], p_flow_first bigint[], p_flow_busy boolean[])
RETURNS TABLE (o_i bigint, o_seq bigint, o_head boolean, o_next_at bigint)
LANGUAGE sql IMMUTABLE AS $$
    SELECT n.i, CASE WHEN n.flow IS NULL THEN 1 ELSE f.first_seq + row_number() OVER w - 1 END,
           n.flow IS NULL OR (row_number() OVER w = 1 AND NOT f.busy), coalesce(n.at, p_now + n.delay)
    FROM unnest(p_flows, p_delays, p_ats) WITH ORDINALITY AS n(flow, delay, at, i)
    LEFT JOIN unnest(p_flow_names, p_flow_first, p_flow_busy) AS f(name, first_seq, busy) ON f.name = n.flow
    WINDOW w AS (PARTITION BY n.flow ORDER BY n.i)
    ORDER BY n.i
$$;

-- enqueue_many in one statement (an enqueue joined to an application's
-- transaction runs this same function in it: fairq.stores.postgres.verbs.run).
-- Lock order: the stored clock (model clock), one advisory lock per
-- distinct id (so two enqueues of one id take turns and the later sees the
-- earlier), the flows by flow_id, the tenants by tenant_id; then the events
-- and heads are inserted. Any repeat that does not match what it repeats (a
-- stored id, a tombstone, or an earlier item of the batch: flow, body and
-- tenant), or an event for a flow whose tenant is another (a flow's tenant is
-- fixed by its first event), writes nothing: the rows are the stored ids
-- (o_kind 'stored'), the batch's flows that have a tenant fixed (o_kind
-- 'flow': o_flow, o_tenant) and one 'conflict' row, and Python raises the
-- Conflict on them (fairq.stores.postgres.tenants.judge_batch). Else the
-- rows are the stored ids and each new event (o_kind 'new': o_event_id,
-- o_seq). One row with only o_stored: an explicit time before the stored
-- clock, refused. p_tenants: each item's tenant (NULL: none). p_kinds,
-- p_max_attempts, p_timeouts, p_backoffs: each item's kind and its own
-- policy (NULL arrays: none has any), stored with a new event; a repeat of
-- a stored event (not of a tombstone, which keeps no kind) or of an
-- earlier item must name the same kind, or it conflicts (o_ev_kind: the
-- stored event's kind).
CREATE OR REPLACE FUNCTION fairq_enqueue(p_ids text[], p_flows text[], p_bodies text[], p_hashes bytea[],
                                         p_delays bigint[], p_ats bigint[], p_model boolean, p_requested bigint,
                                         p_explicit boolean, p_fold integer, p_tenants text[], p_kinds text[],
                                         p_max_attempts integer[], p_timeouts bigint[], p_backoffs text[])
RETURNS TABLE (o_kind text, o_event_id text, o_flow text, o_seq bigint, o_body text, o_hash bytea,
               o_stored bigint, o_tenant text, o_known boolean, o_ev_kind text)
-- Its statements join arrays the planner cannot size well: a large batch
-- would be planned as costly enough to compile (JIT), which takes longer
-- than the work; they are planned once per session (generic plans), as
-- verbs.sql's are.
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now bigint;
    v_stored bigint;
    v_conflict boolean;
    v_s_ids text[];
    v_s_flows text[];
    v_s_seqs bigint[];
    v_s_bodies text[];
    v_s_hashes bytea[];
    v_s_tenants text[];
    v_s_known boolean[];
    v_s_kinds text[];
    v_f_ids text[];
    v_f_flows text[];
    v_f_bodies text[];
    v_f_delays bigint[];
    v_f_ats bigint[];
    v_f_tenants text[];
    v_f_kinds text[];
    v_f_max integer[];
    v_f_timeouts bigint[];
    v_f_backoffs text[];
    v_names text[];
    v_counts bigint[];
    v_fl_names text[];
    v_fl_ids bigint[];
    v_fl_first bigint[];
    v_fl_busy boolean[];
    v_t_ids bigint[];
    v_n_ids text[] := '{}';
    v_n_seqs bigint[] := '{}';
    v_head_times bigint[];
    v_n integer;
    v_tenanted boolean;
    v_any boolean;
    v_n_joined bigint;
    v_fl_tids bigint[];
    v_fl_paused boolean[];
BEGIN
    SELECT t.call_ms, t.stored_ms INTO v_now, v_stored FROM fairq_call_time(p_model, p_requested, p_explicit) AS t;
    IF v_now IS NULL THEN
        o_stored := v_stored;
        RETURN NEXT;
        RETURN;
    END IF;
    v_tenanted := EXISTS (SELECT FROM unnest(p_tenants) AS x WHERE x IS NOT NULL);
    -- A flow's tenant is looked at only once the queue has tenants.
    v_any := v_tenanted OR EXISTS (SELECT FROM tenant);
    -- Enqueues of one id take turns (in hash order, so never in a cycle);
    -- the later one reads the earlier one's row once it has committed.
    PERFORM pg_advisory_xact_lock(26226, s.h)
    FROM (SELECT DISTINCT hashtext(x) AS h FROM unnest(p_ids) AS x ORDER BY 1) AS s;
    -- Each item with what its id already names: the stored event, or the
    -- tombstone of a purged one (an id is never in both tables; looked up by
    -- id, item by item), else the batch's first item of that id. An event id
    -- names one (flow, body, tenant) forever, and so does a purged id while
    -- its tombstone is kept (which does not keep the tenant). A new event of a
    -- flow whose first event is stored has that flow's tenant; of a flow new
    -- here, the tenant of the flow's first new event.
    WITH b AS (SELECT b.*, row_number() OVER w = 1 AS first_of_id, first_value(b.flow) OVER w AS f_flow,
                      first_value(b.body) OVER w AS f_body, first_value(b.tenant) OVER w AS f_tenant,
                      first_value(b.ev_kind) OVER w AS f_ev_kind
               FROM unnest(p_ids, p_flows, p_bodies, p_hashes, p_delays, p_ats, p_tenants, p_kinds, p_max_attempts,
                           p_timeouts, p_backoffs)
                    WITH ORDINALITY AS b(event_id, flow, body, hash, delay, at, tenant, ev_kind, max_attempts, timeout,
                                         backoff, i)
               WINDOW w AS (PARTITION BY b.event_id ORDER BY b.i)),
         k AS (SELECT b.*, s.*, fl.fixed, fl.f_tenant_name,
                      first_value(b.tenant) OVER (PARTITION BY b.flow, s.s_seq IS NULL AND b.first_of_id
                                                  ORDER BY b.i) AS flow_first_tenant
               FROM b LEFT JOIN LATERAL (
                   SELECT f.name, e.seq, e.body, NULL::bytea, tn.name, true, e.kind FROM event AS e
                   LEFT JOIN flow AS f ON f.flow_id = e.flow_id LEFT JOIN tenant AS tn ON tn.tenant_id = e.tenant_id
                   WHERE e.event_id = b.event_id
                   UNION ALL
                   SELECT f.name, t.seq, NULL::text, t.body_hash, NULL::text, false, NULL::text FROM tombstone AS t
                   LEFT JOIN flow AS f ON f.flow_id = t.flow_id WHERE t.event_id = b.event_id)
               AS s(s_flow, s_seq, s_body, s_hash, s_tenant, s_known, s_ev_kind) ON true
               LEFT JOIN LATERAL (SELECT f.next_seq > 1 AS fixed, tn.name AS f_tenant_name FROM flow AS f
                                  LEFT JOIN tenant AS tn ON tn.tenant_id = f.tenant_id WHERE f.name = b.flow)
               AS fl ON v_any AND b.flow IS NOT NULL)
    SELECT coalesce(bool_or(CASE WHEN k.s_seq IS NOT NULL
                                 THEN NOT fairq_repeats(k.flow, k.body, k.hash, k.s_flow, k.s_body, k.s_hash)
                                      OR (k.s_known AND k.s_tenant IS DISTINCT FROM k.tenant)
                                      OR (k.s_known AND k.s_ev_kind IS DISTINCT FROM k.ev_kind)
                                 WHEN NOT k.first_of_id
                                 THEN NOT fairq_repeats(k.flow, k.body, k.hash, k.f_flow, k.f_body, NULL)
                                      OR k.f_tenant IS DISTINCT FROM k.tenant
                                      OR k.f_ev_kind IS DISTINCT FROM k.ev_kind
                                 WHEN k.flow IS NULL THEN false
                                 WHEN k.fixed THEN k.f_tenant_name IS DISTINCT FROM k.tenant
                                 ELSE k.flow_first_tenant IS DISTINCT FROM k.tenant END), false),
           coalesce(array_agg(k.event_id ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_flow ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_seq ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_body ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_hash ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_tenant ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_known ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           coalesce(array_agg(k.s_ev_kind ORDER BY k.i) FILTER (WHERE k.s_seq IS NOT NULL AND k.first_of_id), '{}'),
           array_agg(k.event_id ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.flow ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.body ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.delay ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.at ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.tenant ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.ev_kind ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.max_attempts ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.timeout ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id),
           array_agg(k.backoff ORDER BY k.i) FILTER (WHERE k.s_seq IS NULL AND k.first_of_id)
    INTO v_conflict, v_s_ids, v_s_flows, v_s_seqs, v_s_bodies, v_s_hashes, v_s_tenants, v_s_known, v_s_kinds,
         v_f_ids, v_f_flows, v_f_bodies, v_f_delays, v_f_ats, v_f_tenants, v_f_kinds, v_f_max, v_f_timeouts,
         v_f_backoffs
    FROM k;
    IF v_conflict THEN
        RETURN QUERY SELECT 'stored', s.event_id, s.flow, s.seq, s.body, s.hash, NULL::bigint, s.tenant, s.known,
                            s.ev_kind
                     FROM unnest(v_s_ids, v_s_flows, v_s_seqs, v_s_bodies, v_s_hashes, v_s_tenants, v_s_known,
                                 v_s_kinds)
                          AS s(event_id, flow, seq, body, hash, tenant, known, ev_kind)
                     UNION ALL
                     SELECT 'flow', NULL, f.name, NULL, NULL, NULL, NULL, tn.name, true, NULL FROM flow AS f
                     LEFT JOIN tenant AS tn ON tn.tenant_id = f.tenant_id
                     WHERE f.name = ANY(p_flows) AND f.next_seq > 1
                     UNION ALL SELECT 'conflict', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL;
        RETURN;
    END IF;
    v_n := coalesce(cardinality(v_f_ids), 0);
    IF v_n > 0 THEN
        IF v_tenanted THEN
            -- A tenant's row is made on its first use (defaults: weight 1, no
            -- limits), before any flow is locked (in name order).
            INSERT INTO tenant (name) SELECT DISTINCT x FROM unnest(v_f_tenants) AS x WHERE x IS NOT NULL ORDER BY 1
            ON CONFLICT (name) DO NOTHING;
            SELECT array_agg(te.tenant_id ORDER BY te.tenant_id) INTO v_t_ids
            FROM tenant AS te WHERE te.name = ANY(ARRAY(SELECT DISTINCT x FROM unnest(v_f_tenants) AS x));
        END IF;
        -- Each named flow: how many new events, and the tenant of its first
        -- (each tenant by its name's key).
        SELECT array_agg(c.name ORDER BY c.name), array_agg(c.n ORDER BY c.name),
               array_agg((SELECT te.tenant_id FROM tenant AS te WHERE te.name = c.tenant) ORDER BY c.name)
        INTO v_names, v_counts, v_fl_tids
        FROM (SELECT x.flow AS name, count(*) AS n, (array_agg(x.tenant ORDER BY x.i))[1] AS tenant
              FROM unnest(v_f_flows, v_f_tenants) WITH ORDINALITY AS x(flow, tenant, i)
              WHERE x.flow IS NOT NULL GROUP BY x.flow) AS c;
        IF v_names IS NOT NULL THEN
            -- The flows are locked (flow before head before event, by
            -- flow_id) until commit: an ack of a flow's last event and this
            -- enqueue take turns, so one of them always sees the other's
            -- event or head.
            PERFORM FROM flow WHERE name = ANY(v_names) ORDER BY flow_id FOR NO KEY UPDATE;
            -- Each flow hands out its next `count` seqs; a new flow starts at
            -- 1. Its first event fixes its tenant.
            WITH allocated AS (
                INSERT INTO flow (name, next_seq, tenant_id)
                SELECT c.name, 1 + c.n, c.tid FROM unnest(v_names, v_counts, v_fl_tids) AS c(name, n, tid)
                ORDER BY c.name
                ON CONFLICT (name) DO UPDATE SET next_seq = flow.next_seq + excluded.next_seq - 1,
                    tenant_id = CASE WHEN flow.next_seq = 1 THEN excluded.tenant_id ELSE flow.tenant_id END
                RETURNING flow.flow_id, flow.name, flow.next_seq, flow.tenant_id, flow.paused)
            SELECT array_agg(a.name), array_agg(a.flow_id), array_agg(a.next_seq - c.n),
                   bool_or(a.tenant_id IS DISTINCT FROM c.tid), array_agg(a.paused)
            INTO v_fl_names, v_fl_ids, v_fl_first, v_conflict, v_fl_paused
            FROM allocated AS a JOIN unnest(v_names, v_counts, v_fl_tids) AS c(name, n, tid) ON c.name = a.name;
            IF v_conflict THEN
                -- Another enqueue fixed a flow's tenant after the check above: nothing is written.
                RAISE EXCEPTION 'a flow of this batch got another tenant meanwhile; nothing was written'
                    USING ERRCODE = 'serialization_failure';
            END IF;
            -- A flow has a head iff it has unacked work; the flow lock keeps it so.
            SELECT array_agg(EXISTS (SELECT FROM head AS h WHERE h.flow_id = f.id) ORDER BY f.i)
            INTO v_fl_busy FROM unnest(v_fl_ids) WITH ORDINALITY AS f(id, i);
        END IF;
        IF v_t_ids IS NOT NULL THEN
            -- The tenants, last, in tenant_id order: their places and counts change below.
            PERFORM FROM tenant WHERE tenant_id = ANY(v_t_ids) ORDER BY tenant_id FOR NO KEY UPDATE;
        END IF;
        -- New events are ready; only heads get a rotation place (untenanted:
        -- the queue's tail, read without a lock; tenanted: its tenant's
        -- tail, and a tenant with no head at all joins at the queue's tail
        -- with a new turn, taken before its first head's) and a dispatch
        -- time; a paused flow's new head stays out of the rotation (its flow
        -- is locked above, so a pause or resume cannot pass between).
        WITH p AS (SELECT n.i, n.event_id, fl.flow_id, p.o_seq AS seq, n.body, p.o_head AS head,
                          p.o_next_at AS next_at,
                          (SELECT te.tenant_id FROM tenant AS te WHERE te.name = n.tenant) AS tenant_id,
                          coalesce(fl.paused, false) AS paused, n.ev_kind, n.max_attempts, n.timeout, n.backoff
                   FROM unnest(v_f_ids, v_f_flows, v_f_bodies, v_f_tenants, v_f_kinds, v_f_max, v_f_timeouts,
                               v_f_backoffs)
                        WITH ORDINALITY AS n(event_id, flow, body, tenant, ev_kind, max_attempts, timeout, backoff, i)
                   JOIN fairq_placed(v_f_flows, v_f_delays, v_f_ats, v_now, v_fl_names, v_fl_first, v_fl_busy) AS p
                        ON p.o_i = n.i
                   LEFT JOIN unnest(v_fl_names, v_fl_ids, v_fl_paused) AS fl(name, flow_id, paused)
                        ON fl.name = n.flow),
             new AS (INSERT INTO event (event_id, flow_id, seq, body, state, created_ms, due_ms, next_at_ms, tenant_id,
                                        kind, max_attempts, timeout_ms, backoff)
                     SELECT p.event_id, p.flow_id, p.seq, p.body, 'ready', v_now, p.next_at, p.next_at, p.tenant_id,
                            p.ev_kind, p.max_attempts, p.timeout, p.backoff
                     FROM p ORDER BY p.i
                     RETURNING event.id, event.event_id, event.flow_id, event.tenant_id),
             j AS (SELECT p.event_id, p.tenant_id,
                          p.tenant_id IS NOT NULL AND row_number() OVER (PARTITION BY p.tenant_id ORDER BY p.i) = 1
                          AND NOT EXISTS (SELECT FROM head AS h WHERE h.tenant_id = p.tenant_id) AS joins, p.i, p.next_at,
                          p.paused
                   FROM p WHERE p.head),
             h AS (SELECT j.event_id, j.tenant_id, j.joins, j.next_at, j.paused,
                          CASE WHEN j.joins THEN nextval('turn_seq') END AS t_turn, nextval('turn_seq') AS turn
                   FROM j ORDER BY j.i),
             heads AS (INSERT INTO head (event_pk, flow_id, pass, turn, dispatch_ms, runnable, tenant_id, paused)
                       SELECT new.id, new.flow_id,
                              CASE WHEN h.tenant_id IS NULL THEN fairq_join_pass((SELECT max(r.tail) FROM rotation AS r))
                                   ELSE fairq_join_pass((SELECT te.tail FROM tenant AS te WHERE te.tenant_id = h.tenant_id))
                              END,
                              h.turn, h.next_at, h.next_at <= v_now AND NOT h.paused, h.tenant_id, h.paused
                       FROM new JOIN h ON h.event_id = new.event_id
                       RETURNING head.dispatch_ms, head.tenant_id, head.runnable, head.paused),
             joined AS (UPDATE tenant AS te SET pass = fairq_join_pass((SELECT max(r.tail) FROM rotation AS r)),
                            turn = h.t_turn
                        FROM h WHERE h.joins AND te.tenant_id = h.tenant_id RETURNING te.tenant_id)
        SELECT (SELECT array_agg(p.event_id ORDER BY p.i) FROM p), (SELECT array_agg(p.seq ORDER BY p.i) FROM p),
               (SELECT array_agg(heads.dispatch_ms) FROM heads WHERE NOT heads.paused),
               (SELECT array_agg(heads.tenant_id) FROM heads WHERE heads.runnable AND heads.tenant_id IS NOT NULL),
               (SELECT count(*) FROM joined)
        INTO v_n_ids, v_n_seqs, v_head_times, v_t_ids, v_n_joined;
        IF v_t_ids IS NOT NULL THEN
            -- Each tenant counts its heads runnable now (its row is locked above).
            PERFORM fairq_tenants_touched(v_t_ids, array_fill(1, ARRAY[cardinality(v_t_ids)]), '{}');
        END IF;
    END IF;
    -- Sleeping workers wake for a head claimable now, or learn of the
    -- earliest one left waiting; the model clock keeps the time this call ran at.
    -- Inside an application's transaction (fairq.outbox set): rows of its own.
    PERFORM fairq_bookkeep(coalesce(current_setting('fairq.outbox', true), '') = 'on', p_model AND v_now > v_stored,
                           v_now, false, 0, 0, ARRAY['ready', 'total_enqueued'], ARRAY[v_n, v_n]::bigint[], p_fold,
                           (SELECT count(*) FROM unnest(v_head_times) AS t WHERE t <= v_now)::integer,
                           (SELECT min(t) FROM unnest(v_head_times) AS t WHERE t > v_now));
    RETURN QUERY SELECT 'stored', s.event_id, s.flow, s.seq, s.body, s.hash, NULL::bigint, s.tenant, s.known,
                        s.ev_kind
                 FROM unnest(v_s_ids, v_s_flows, v_s_seqs, v_s_bodies, v_s_hashes, v_s_tenants, v_s_known, v_s_kinds)
                      AS s(event_id, flow, seq, body, hash, tenant, known, ev_kind)
                 UNION ALL
                 SELECT 'new', n.event_id, NULL, n.seq, NULL, NULL, NULL, NULL, NULL, NULL
                 FROM unnest(v_n_ids, v_n_seqs) AS n(event_id, seq);
END
$$;
