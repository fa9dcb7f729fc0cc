-- fairq's server-side functions (since schema version 4): the common verbs,
-- so each is one statement (its own transaction, one round trip). Not a
-- step of the ladder: every upgrade applies this file again after its steps
-- (fairq.stores.postgres.schema.FUNCTIONS), so it holds the current definitions; a
-- change here comes with a new schema version.
--
-- The rules these functions evaluate are fairq.kernel.rules' and fairq.kernel.policy's:
-- each rule is a small function here (fairq_effective_now, fairq_rotate,
-- fairq_expired_lease_fate, fairq_fence, fairq_backoff_ms, fairq_decide,
-- fairq_lag_bucket, fairq_seconds_json), and tests/postgres/test_pg_rules_sql.py
-- runs each beside its Python rule over thousands of random inputs. What a
-- transaction leaves behind (clock, rotation shard, counters, wake-ups) is
-- fairq_bookkeep, called by these functions and by the Python path alike.
--
-- Each verb runs with plan_cache_mode = force_generic_plan: its statements
-- are planned once per session, not on every call, and each is written so
-- that its generic plan reaches rows through their indexes (= ANY(array) on a
-- key, not a join over an array of unknown length).

-- policy.effective_now: the time a call runs at against the stored clock;
-- NULL when an explicit time before it is refused (ClockError).
CREATE OR REPLACE FUNCTION fairq_effective_now(p_requested bigint, p_stored bigint, p_explicit boolean)
RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_requested >= p_stored THEN p_requested WHEN p_explicit THEN NULL ELSE p_stored END
$$;

-- rules.rotate: the claimed head's new pass, the virtual time and the tail
-- (policy.stride: 720720 // weight). PL/pgSQL, as every rule returning a
-- record: a SQL function returning one is planned again on each call.
CREATE OR REPLACE FUNCTION fairq_rotate(p_pass bigint, p_weight integer, p_vtime bigint, p_tail bigint,
                                        OUT o_pass bigint, OUT o_vtime bigint, OUT o_tail bigint)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    o_vtime := greatest(p_pass, p_vtime);
    o_pass := o_vtime + 720720 / p_weight;
    o_tail := greatest(o_pass, p_tail);
END
$$;

-- rules.join_pass: a flow that was idle joins at the tail.
CREATE OR REPLACE FUNCTION fairq_join_pass(p_tail bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT p_tail
$$;

-- rules.expired_lease_fate: NULL (claimed again) or the quarantine reason and cause.
CREATE OR REPLACE FUNCTION fairq_expired_lease_fate(p_attempts integer, p_max_attempts integer,
                                                    OUT o_reason text, OUT o_cause text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_attempts >= p_max_attempts THEN 'lease expired after attempt ' || p_attempts || ' of '
                || p_max_attempts || '; retry budget spent' END,
           CASE WHEN p_attempts >= p_max_attempts THEN 'attempts_exhausted' END
$$;

-- rules.fence: NULL (the lease may settle), 'stale' (StaleLease) or 'expired' (LeaseExpired).
CREATE OR REPLACE FUNCTION fairq_fence(p_generation bigint, p_now bigint, p_state text, p_stored_generation bigint,
                                       p_lease_until bigint, p_settled_in_batch boolean)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_settled_in_batch OR p_state IS NULL OR p_stored_generation IS DISTINCT FROM p_generation
                     OR p_state <> 'inflight' THEN 'stale'
                WHEN p_now >= p_lease_until THEN 'expired' END
$$;

-- policy.lag_bucket: bisect_left over CLAIM_LAG_BOUNDS_MS (the bounds below
-- p_lag are those at most p_lag - 1: width_bucket counts those); one
-- expression, so the caller's plan takes it in.
CREATE OR REPLACE FUNCTION fairq_lag_bucket(p_lag bigint) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_lag > 5 THEN width_bucket(p_lag - 1, ARRAY[5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
        10000, 30000, 60000, 300000, 900000, 3600000]::bigint[]) ELSE 0 END
$$;

-- policy.from_ms as JSON text: Python's repr of ms / 1000 (canonical audit detail).
CREATE OR REPLACE FUNCTION fairq_seconds_json(p_ms bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_ms IS NULL THEN 'null' WHEN p_ms % 1000 = 0 THEN (p_ms / 1000)::text || '.0'
                ELSE (p_ms::float8 / 1000)::text END
$$;

-- Backoff.delay in ms (policy.to_ms), the jitter draw u in [0, 1) given:
-- min(cap, base * factor ** (attempts - 1)), a power that overflows is the cap.
CREATE OR REPLACE FUNCTION fairq_backoff_ms(p_attempts integer, p_base float8, p_factor float8, p_cap float8,
                                            p_jitter boolean, p_draw float8)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_k integer := greatest(p_attempts - 1, 0);
    v_raw float8;
    v_d float8;
BEGIN
    IF v_k * ln(p_factor) + ln(greatest(p_base, 1)) < 700 THEN
        v_raw := p_base * power(p_factor, v_k);
    ELSE
        BEGIN
            v_raw := p_base * power(p_factor, v_k);
        EXCEPTION WHEN numeric_value_out_of_range THEN
            v_raw := p_cap;
        END;
    END IF;
    v_d := least(p_cap, v_raw);
    IF p_jitter AND v_d <> 0 THEN
        v_d := v_d * (0.5 + p_draw / 2);
    END IF;
    RETURN round(v_d * 1000)::bigint;
END
$$;

-- policy.decide: the state after a fenced settle, its next time, the
-- quarantine cause and the round's attempts. p_delay_ms: the caller's delay
-- (NULL: the backoff, with the draw p_draw).
CREATE OR REPLACE FUNCTION fairq_decide(p_outcome text, p_attempts integer, p_max_attempts integer, p_now bigint,
                                        p_delay_ms bigint, p_base float8, p_factor float8, p_cap float8,
                                        p_jitter boolean, p_draw float8,
                                        OUT o_state text, OUT o_next_at bigint, OUT o_cause text,
                                        OUT o_attempts integer)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    o_state := CASE WHEN p_outcome = 'ack' THEN 'acked' WHEN p_outcome = 'release' THEN 'ready'
                    WHEN p_outcome = 'fail' OR p_attempts >= p_max_attempts THEN 'quarantined' ELSE 'ready' END;
    o_next_at := CASE WHEN p_outcome = 'release' THEN p_now
                      WHEN p_outcome = 'retry' AND p_attempts < p_max_attempts
                      THEN p_now + coalesce(p_delay_ms, fairq_backoff_ms(p_attempts, p_base, p_factor, p_cap,
                                                                         p_jitter, p_draw)) END;
    o_cause := CASE WHEN p_outcome = 'fail' THEN 'fail'
                    WHEN p_outcome = 'retry' AND p_attempts >= p_max_attempts THEN 'attempts_exhausted' END;
    o_attempts := CASE WHEN p_outcome = 'release' THEN p_attempts - 1 ELSE p_attempts END;
END
$$;

-- policy.own_budget: the retry budget and backoff an event is judged by:
-- its own where it stores them (max_attempts; backoff as the JSON text
-- policy.backoff_text writes), else the queue's policy's.
CREATE OR REPLACE FUNCTION fairq_own_budget(p_max_attempts integer, p_backoff text, p_policy_max integer,
                                            p_base float8, p_factor float8, p_cap float8, p_jitter boolean,
                                            OUT o_max_attempts integer, OUT o_base float8, OUT o_factor float8,
                                            OUT o_cap float8, OUT o_jitter boolean)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_b json;
BEGIN
    o_max_attempts := coalesce(p_max_attempts, p_policy_max);
    IF p_backoff IS NULL THEN
        o_base := p_base;
        o_factor := p_factor;
        o_cap := p_cap;
        o_jitter := p_jitter;
    ELSE
        v_b := p_backoff::json;
        o_base := (v_b ->> 'base')::float8;
        o_factor := (v_b ->> 'factor')::float8;
        o_cap := (v_b ->> 'cap')::float8;
        o_jitter := (v_b ->> 'jitter')::boolean;
    END IF;
END
$$;

-- Whoever waits for one of these events to end (Queue.wait: its row in
-- event_result_waiter) hears of it on the result channel at this
-- transaction's commit; an event nobody waits for costs one look at that
-- (empty) index and no NOTIFY. fairq_settle and fairq_discard call it.
CREATE OR REPLACE FUNCTION fairq_tell_waiters(p_ids text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('fairq_result', w.event_id) FROM event_result_waiter AS w WHERE w.event_id = ANY(p_ids);
END
$$;

-- True unless no worker can be asleep now (fairq.stores.postgres.listen): a
-- listening connection about to sleep holds lock (26228, 0) shared for as
-- long as its process may sleep, then takes (26228, 1) exclusive once, which
-- waits for every transaction holding it shared to end. A transaction asks
-- just before its commit: it takes (26228, 1) shared until it ends (refused
-- only while a sleeper is passing it: asleep), then tries (26228, 0)
-- exclusive, let go at once, in one expression (held by a sleeper: asleep).
-- So a transaction that saw nobody asleep commits before any worker that
-- goes to sleep afterwards has looked for work again. A refusal by a
-- concurrent check only adds a wake-up.
CREATE OR REPLACE FUNCTION fairq_asleep() RETURNS boolean LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN NOT pg_try_advisory_xact_lock_shared(26228, 1) THEN true
                WHEN pg_try_advisory_lock(26228, 0) THEN NOT pg_advisory_unlock(26228, 0)
                ELSE true END
$$;

-- What a transaction leaves behind, just before it commits (the Python
-- path's flush calls it too). p_outbox: a transaction joined to an
-- application's, which takes no shard and appends its counters to rows of
-- its own (below the shards, keyed by its transaction id); else the shard is
-- one no other transaction holds (SKIP LOCKED on its rotation row, which
-- guards its counter rows), waited for only when every shard is held.
-- p_ready: how many heads the transaction made claimable now, the ready
-- notice's payload (a process wakes that many of its idle workers, not all);
-- 0: no ready notice; NULL: a notice that does not count (every idle worker
-- wakes). p_due: the earliest time a head it left waiting is due, told when
-- nothing became claimable now.
CREATE OR REPLACE FUNCTION fairq_bookkeep(p_outbox boolean, p_store_time boolean, p_now bigint, p_move boolean,
                                          p_vtime bigint, p_tail bigint, p_names text[], p_ns bigint[],
                                          p_fold integer, p_ready integer, p_due bigint)
RETURNS integer LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_shard integer;
    v_notify boolean := p_ready IS DISTINCT FROM 0;
    v_tell boolean;
BEGIN
    IF NOT (p_store_time OR p_move OR v_notify OR p_due IS NOT NULL OR 0 <> ANY(p_ns)) THEN
        RETURN NULL;
    END IF;
    IF p_outbox THEN
        v_shard := -1 - mod(txid_current(), 2147483647)::integer;
    ELSE
        -- A shard drawn at random, unless another transaction holds it; then
        -- any shard no other holds; when every one is held, wait for one.
        v_shard := floor(random() * 32)::integer;
        SELECT ro.shard INTO v_shard FROM rotation AS ro WHERE ro.shard = v_shard FOR UPDATE SKIP LOCKED;
        IF v_shard IS NULL THEN
            SELECT ro.shard INTO v_shard FROM rotation AS ro ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED;
        END IF;
        IF v_shard IS NULL THEN
            v_shard := floor(random() * 32)::integer;
            PERFORM FROM rotation WHERE shard = v_shard FOR UPDATE;
        END IF;
    END IF;
    -- The stored clock moves under its row lock (model clock only).
    IF p_store_time THEN
        UPDATE queue_clock SET now_ms = p_now WHERE id = 1;
    END IF;
    -- A max-register: a shard only moves forward; readers take the max of all shards.
    IF p_move THEN
        UPDATE rotation SET vtime = greatest(vtime, p_vtime), tail = greatest(tail, p_tail) WHERE shard = v_shard;
    END IF;
    -- Counter rows appended by committed outbox transactions are folded into
    -- the shard taken (skipping those another fold has); each counter's true
    -- value is the sum of its rows.
    WITH foldable AS (SELECT c.name, c.shard FROM counter AS c WHERE c.shard < 0 AND NOT p_outbox
                      LIMIT p_fold FOR UPDATE SKIP LOCKED),
         folded AS (DELETE FROM counter USING foldable WHERE counter.name = foldable.name
                    AND counter.shard = foldable.shard RETURNING counter.name, counter.n)
    INSERT INTO counter (name, shard, n)
    SELECT c.name, v_shard, sum(c.n)
    FROM (SELECT * FROM unnest(p_names, p_ns) AS m(name, n) WHERE m.n <> 0 UNION ALL SELECT * FROM folded)
         AS c(name, n)
    GROUP BY c.name ORDER BY c.name
    ON CONFLICT (name, shard) DO UPDATE SET n = counter.n + excluded.n;
    -- Sleeping workers wake, or learn of an earlier due time; delivered at
    -- commit. A NOTIFY serialises every notifying commit of the database, so
    -- fairq's own transactions send it only while some worker may be asleep
    -- (fairq_asleep); an outbox transaction, which may stay open, always does.
    v_tell := v_notify OR p_due IS NOT NULL;
    IF v_tell AND NOT p_outbox THEN
        v_tell := fairq_asleep();
    END IF;
    IF v_tell AND v_notify THEN
        PERFORM pg_notify('fairq_ready', coalesce(p_ready::text, ''));
    ELSIF v_tell THEN
        PERFORM pg_notify('fairq_due', p_due::text);
    END IF;
    RETURN v_shard;
END
$$;

-- The bookkeeping as schema versions 4 and 5 called it, with p_notify (a
-- process of that version still running beside an upgraded schema): its
-- ready notice wakes every idle worker.
CREATE OR REPLACE FUNCTION fairq_bookkeep(p_outbox boolean, p_store_time boolean, p_now bigint, p_move boolean,
                                          p_vtime bigint, p_tail bigint, p_names text[], p_ns bigint[],
                                          p_fold integer, p_notify boolean, p_due bigint)
RETURNS integer LANGUAGE sql AS $$
    SELECT fairq_bookkeep(p_outbox, p_store_time, p_now, p_move, p_vtime, p_tail, p_names, p_ns, p_fold,
                          CASE WHEN p_notify THEN NULL ELSE 0 END, p_due)
$$;

-- The time a verb's transaction runs at: the server's, or (model clock) the
-- stored clock locked, with policy.effective_now. call_ms NULL: refused.
CREATE OR REPLACE FUNCTION fairq_call_time(p_model boolean, p_requested bigint, p_explicit boolean,
                                           OUT call_ms bigint, OUT stored_ms bigint)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_model THEN
        -- Model-clock writers take turns on the stored clock, as on SQLite.
        SELECT now_ms INTO stored_ms FROM queue_clock WHERE id = 1 FOR UPDATE;
        call_ms := fairq_effective_now(p_requested, stored_ms, p_explicit);
    ELSE
        call_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
        stored_ms := call_ms;
    END IF;
END
$$;

-- claim_many in one statement (a claim inside a transaction, such as an
-- application's, runs this same function in it: fairq.stores.postgres.verbs.run): heads whose time has come
-- are promoted (skipping heads another transaction holds), tenants whose
-- hold is over released; then, claim by claim, the lower of the untenanted
-- head and the claimable tenant with the lowest (pass, turn) is taken
-- (fairq.kernel.tenants: two levels). Untenanted candidates are read in
-- rotation order below the tenant's place, and only those still at the
-- position read are locked, FOR UPDATE SKIP LOCKED; each is judged (an
-- expired lease: audited, or quarantined when its round's budget is spent)
-- and takes its rotation step. A tenant's row is locked (waited for:
-- claims of one tenant take turns on it), read again, judged by its limits
-- (held back, without losing its place, when at its cap or out of tokens),
-- and then its lowest head is locked SKIP LOCKED, judged and claimed with
-- the two-level step. Lock order: heads (never waited for), then tenant
-- rows, waited for only in tenant_id order above any tenant already held.
-- Rows: one per lease, in claim order; one row with only o_stored when an
-- explicit time before the stored clock is refused. p_lease_ms and
-- p_max_attempts NULL: the stored policy's; an event with a budget of its
-- own (event.max_attempts) is judged by that. Each lease's row carries the
-- event's kind and handler timeout (o_ev_kind, o_timeout_ms).
CREATE OR REPLACE FUNCTION fairq_claim(p_n integer, p_owner text, p_model boolean, p_requested bigint,
                                       p_explicit boolean, p_lease_ms bigint, p_max_attempts integer,
                                       p_fold integer)
RETURNS TABLE (o_event_id text, o_flow text, o_seq bigint, o_body text, o_generation bigint, o_attempts integer,
               o_lifetime integer, o_lease_until bigint, o_now bigint, o_stored bigint, o_ev_kind text,
               o_timeout_ms bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now bigint;
    v_stored bigint;
    v_lease bigint;
    v_max integer;
    v_until bigint;
    v_vtime bigint;
    v_tail bigint;
    v_promoted integer;
    v_pt bigint[];
    v_t_lock bigint[];
    v_pn integer[];
    v_claims integer := 0;
    v_from_ready integer := 0;
    v_want integer;
    v_locked integer;
    v_seen bigint[] := '{}';
    v_page bigint[];
    v_cand_pk bigint[];
    v_cand_pass bigint[];
    v_cand_turn bigint[];
    v_pks bigint[] := '{}';
    v_passes bigint[] := '{}';
    v_turns bigint[] := '{}';
    v_expired integer := 0;
    v_quarantined integer := 0;
    v_lags text[] := '{}';
    v_names text[];
    v_ns bigint[];
    v_tid bigint;
    v_tpass bigint;
    v_tturn bigint;
    v_t_past bigint := -1;
    v_t_past_turn bigint := -1;
    v_t_held bigint := 0;
    v_t_claimed bigint[] := '{}';
    v_live bigint;
    v_end bigint;
    v_hold bigint;
    v_outbox boolean := coalesce(current_setting('fairq.outbox', true), '') = 'on';
    t record;
    r record;
    v_fate record;
    v_step record;
    v_two record;
BEGIN
    SELECT c.call_ms, c.stored_ms INTO v_now, v_stored FROM fairq_call_time(p_model, p_requested, p_explicit) AS c;
    IF v_now IS NULL THEN
        o_stored := v_stored;
        RETURN NEXT;
        RETURN;
    END IF;
    -- The one policy row as stored now, and the rotation register: the
    -- highest of every shard, read without a lock.
    SELECT coalesce(p_lease_ms, p.lease_ms), coalesce(p_max_attempts, p.max_attempts),
           (SELECT max(ro.vtime) FROM rotation AS ro), (SELECT max(ro.tail) FROM rotation AS ro)
    INTO v_lease, v_max, v_vtime, v_tail FROM policy AS p WHERE p.id = 1;
    v_until := v_now + v_lease;
    -- Heads whose time has come enter the rotation indexes, locked in event
    -- order, skipping heads another transaction holds; counted per tenant.
    -- A paused flow's head stays out (through head_waiting, which leaves it out).
    WITH p AS (UPDATE head SET runnable = true WHERE event_pk = ANY(ARRAY(SELECT h.event_pk FROM head AS h
                   WHERE NOT h.runnable AND h.dispatch_ms <= v_now AND NOT h.paused
                   ORDER BY h.event_pk FOR UPDATE SKIP LOCKED))
               RETURNING head.tenant_id),
         g AS (SELECT p.tenant_id, count(*)::integer AS n FROM p GROUP BY p.tenant_id)
    SELECT coalesce(sum(g.n), 0)::integer, array_agg(g.tenant_id) FILTER (WHERE g.tenant_id IS NOT NULL),
           array_agg(g.n) FILTER (WHERE g.tenant_id IS NOT NULL)
    INTO v_promoted, v_pt, v_pn FROM g;
    -- Tenants with heads promoted count them, and holds that are over end.
    -- Their rows are locked by key alone, in tenant_id order, then judged:
    -- a lock whose condition could change while it waits might be taken and
    -- then filtered out unseen, and the loop below must know the highest
    -- tenant this claim holds (v_t_held) to wait only above it.
    SELECT array_agg(te.tenant_id ORDER BY te.tenant_id) INTO v_t_lock FROM tenant AS te
    WHERE te.tenant_id = ANY(coalesce(v_pt, '{}')) OR (te.held_until_ms > 0 AND te.held_until_ms <= v_now);
    IF v_t_lock IS NOT NULL THEN
        PERFORM FROM tenant AS te WHERE te.tenant_id = ANY(v_t_lock) ORDER BY te.tenant_id FOR NO KEY UPDATE;
        v_t_held := v_t_lock[cardinality(v_t_lock)];
        UPDATE tenant AS te
        SET runnable = te.runnable + coalesce((SELECT sum(c.n) FROM unnest(v_pt, v_pn) AS c(t, n)
                                               WHERE c.t = te.tenant_id), 0),
            held_until_ms = CASE WHEN te.held_until_ms <= v_now THEN 0 ELSE te.held_until_ms END
        WHERE te.tenant_id = ANY(v_t_lock)
              AND (te.tenant_id = ANY(coalesce(v_pt, '{}')) OR (te.held_until_ms > 0 AND te.held_until_ms <= v_now));
    END IF;
    WHILE v_claims < p_n LOOP
        v_want := p_n - v_claims;
        -- The claimable tenant with the lowest place (through tenant_rotation)
        -- after the last one this claim passed over: a tenant is passed over
        -- only while it is the lowest, and claims only move tenants up, so
        -- every tenant not passed over is placed after it.
        v_tid := NULL;
        SELECT te.tenant_id, te.pass, te.turn INTO v_tid, v_tpass, v_tturn FROM tenant AS te
        WHERE te.runnable > 0 AND te.held_until_ms = 0 AND (te.pass, te.turn) > (v_t_past, v_t_past_turn)
        ORDER BY te.pass, te.turn LIMIT 1;
        IF v_tid IS NULL THEN
            v_tpass := 9223372036854775807;
            v_tturn := 9223372036854775807;
        END IF;
        -- Untenanted candidates placed before that tenant, from the snapshot,
        -- in rotation order, through head_rotation.
        SELECT array_agg(c.event_pk ORDER BY c.pass, c.turn), array_agg(c.pass ORDER BY c.pass, c.turn),
               array_agg(c.turn ORDER BY c.pass, c.turn)
        INTO v_cand_pk, v_cand_pass, v_cand_turn
        FROM (SELECT h.event_pk, h.pass, h.turn FROM head AS h
              WHERE h.runnable AND h.tenant_id IS NULL AND NOT (h.event_pk = ANY(v_seen))
                    AND (h.pass, h.turn) < (v_tpass, v_tturn)
              ORDER BY h.pass, h.turn LIMIT least(2 * v_want + 2, 1000)) AS c;
        IF v_cand_pk IS NULL THEN
            EXIT WHEN v_tid IS NULL;
            -- The tenant's row, locked: waited for above every tenant this
            -- claim holds (so never in a cycle), else only if free.
            IF v_tid > v_t_held THEN
                SELECT te.* INTO t FROM tenant AS te WHERE te.tenant_id = v_tid FOR NO KEY UPDATE;
                v_t_held := v_tid;
            ELSE
                SELECT te.* INTO t FROM tenant AS te WHERE te.tenant_id = v_tid FOR NO KEY UPDATE SKIP LOCKED;
                IF NOT FOUND THEN
                    v_t_past := v_tpass;
                    v_t_past_turn := v_tturn;
                    CONTINUE;
                END IF;
            END IF;
            -- Read again under the lock: moved, emptied or held meanwhile, pick again.
            CONTINUE WHEN t.runnable = 0 OR t.held_until_ms <> 0 OR t.pass <> v_tpass OR t.turn <> v_tturn;
            v_hold := NULL;
            IF t.max_inflight > 0 THEN
                -- Its live leases (through head_tenant): every claim of it
                -- committed before this lock, and this claim's own.
                SELECT count(*) + cardinality(array_positions(v_t_claimed, v_tid)), min(h.dispatch_ms)
                INTO v_live, v_end FROM head AS h JOIN event AS e ON e.id = h.event_pk
                WHERE h.tenant_id = v_tid AND h.dispatch_ms > v_now AND NOT h.runnable AND e.state = 'inflight';
                IF v_live >= t.max_inflight THEN
                    -- A settle of its events in flight (holding the key
                    -- shared) may free a slot this count cannot see: held only
                    -- when none is, counted again once the key is ours.
                    IF pg_try_advisory_xact_lock(26229, fairq_tenant_key(v_tid)) THEN
                        SELECT count(*) + cardinality(array_positions(v_t_claimed, v_tid)), min(h.dispatch_ms)
                        INTO v_live, v_end FROM head AS h JOIN event AS e ON e.id = h.event_pk
                        WHERE h.tenant_id = v_tid AND h.dispatch_ms > v_now AND NOT h.runnable
                              AND e.state = 'inflight';
                        IF v_live >= t.max_inflight THEN
                            v_hold := coalesce(v_end, v_until);
                        END IF;
                    ELSE
                        v_t_past := v_tpass;
                        v_t_past_turn := v_tturn;
                        CONTINUE;
                    END IF;
                END IF;
            END IF;
            IF v_hold IS NULL AND t.rate > 0 THEN
                v_hold := nullif(fairq_bucket_ready_at(t.tokens_milli, t.at_ms, v_now, t.rate, t.burst), v_now);
            END IF;
            IF v_hold IS NOT NULL THEN
                -- Held back without losing its place; claims skip it until then.
                UPDATE tenant SET held_until_ms = greatest(v_hold, 1) WHERE tenant_id = v_tid;
                v_t_past := v_tpass;
                v_t_past_turn := v_tturn;
                CONTINUE;
            END IF;
            -- Its candidates, in its own rotation order, through head_tenant_rotation.
            SELECT array_agg(c.event_pk ORDER BY c.pass, c.turn), array_agg(c.pass ORDER BY c.pass, c.turn),
                   array_agg(c.turn ORDER BY c.pass, c.turn)
            INTO v_cand_pk, v_cand_pass, v_cand_turn
            FROM (SELECT h.event_pk, h.pass, h.turn FROM head AS h
                  WHERE h.tenant_id = v_tid AND h.runnable AND NOT (h.event_pk = ANY(v_seen))
                  ORDER BY h.pass, h.turn LIMIT 4) AS c;
            IF v_cand_pk IS NULL THEN
                v_t_past := v_tpass;
                v_t_past_turn := v_tturn;
                CONTINUE;
            END IF;
            v_want := 1;
        ELSE
            v_tid := NULL;
        END IF;
        v_page := '{}';
        v_locked := 0;
        -- Only candidates still at the position read are locked; one another
        -- claimer holds is skipped, one it moved is left at its new place.
        FOR r IN
            SELECT e.id, e.event_id, f.weight, h.pass, e.state, e.generation, e.attempts, e.lifetime_attempts,
                   e.lease_until_ms, e.owner, e.due_ms, e.first_claim_ms, e.max_attempts
            FROM head AS h JOIN unnest(v_cand_pk, v_cand_pass, v_cand_turn) AS c(pk, pass, turn)
                 ON h.event_pk = c.pk AND h.pass = c.pass AND h.turn = c.turn
            JOIN event AS e ON e.id = h.event_pk LEFT JOIN flow AS f ON f.flow_id = e.flow_id
            WHERE h.runnable ORDER BY h.pass, h.turn LIMIT v_want FOR UPDATE OF h SKIP LOCKED
        LOOP
            v_locked := v_locked + 1;
            v_page := v_page || r.id;
            IF r.state <> 'ready' THEN
                v_expired := v_expired + 1;
                -- The event's own budget where it has one (policy.own_budget).
                v_fate := fairq_expired_lease_fate(r.attempts, coalesce(r.max_attempts, v_max));
                IF v_fate.o_reason IS NOT NULL THEN
                    -- An expired head whose round budget is spent stops, and
                    -- blocks its flow (keeping its rotation place); its
                    -- tenant keeps its place too.
                    UPDATE event SET state = 'quarantined', lease_until_ms = NULL, next_at_ms = NULL,
                        reason = v_fate.o_reason WHERE id = r.id;
                    UPDATE head SET dispatch_ms = NULL, runnable = false WHERE event_pk = r.id;
                    IF v_tid IS NOT NULL THEN
                        -- One runnable head fewer (the row is locked above).
                        UPDATE tenant SET runnable = runnable - 1 WHERE tenant_id = v_tid;
                    END IF;
                    v_quarantined := v_quarantined + 1;
                    -- Audit rows are appended, never changed.
                    INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail)
                    VALUES (r.event_id, 'quarantine', v_fate.o_reason, r.owner, r.generation, v_now,
                            '{"attempts":' || r.attempts || ',"cause":"' || v_fate.o_cause || '","lease_until":'
                            || fairq_seconds_json(r.lease_until_ms) || ',"lifetime_attempts":'
                            || r.lifetime_attempts || '}');
                    CONTINUE;
                END IF;
                INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail)
                VALUES (r.event_id, 'expired', 'lease expired before the holder settled', r.owner, r.generation,
                        v_now, '{"attempts":' || r.attempts || ',"lease_until":'
                        || fairq_seconds_json(r.lease_until_ms) || '}');
            END IF;
            IF r.first_claim_ms IS NULL THEN
                v_lags := v_lags || ('lag_' || fairq_lag_bucket(v_now - r.due_ms));
            END IF;
            -- The turn is taken now, at claim time, not when the work succeeds.
            IF v_tid IS NULL THEN
                v_step := fairq_rotate(r.pass, coalesce(r.weight, 1), v_vtime, v_tail);
                v_vtime := v_step.o_vtime;
                v_tail := v_step.o_tail;
                v_passes := v_passes || v_step.o_pass;
            ELSE
                -- Both levels step: the tenant's turn first, then its head's.
                v_two := fairq_tenant_step(t.pass, t.weight, r.pass, coalesce(r.weight, 1), v_vtime, v_tail,
                                           t.vtime, t.tail);
                v_vtime := v_two.o_t_vtime;
                v_tail := v_two.o_t_tail;
                v_passes := v_passes || v_two.o_f_pass;
                -- Its new place, its flows' rotation, one runnable head
                -- fewer, and a token taken (the row is locked above).
                UPDATE tenant SET pass = v_two.o_t_pass, turn = nextval('turn_seq'), vtime = v_two.o_f_vtime,
                    tail = v_two.o_f_tail, runnable = runnable - 1,
                    tokens_milli = CASE WHEN rate > 0
                                        THEN fairq_bucket_level(tokens_milli, at_ms, v_now, rate, burst) - 1000 END,
                    at_ms = CASE WHEN rate > 0 THEN greatest(v_now, coalesce(at_ms, v_now)) END
                WHERE tenant_id = v_tid;
                v_t_claimed := v_t_claimed || v_tid;
            END IF;
            v_turns := v_turns || nextval('turn_seq');
            v_pks := v_pks || r.id;
            v_claims := v_claims + 1;
            v_from_ready := v_from_ready + (r.state = 'ready')::integer;
        END LOOP;
        -- Judged here, or skipped (another claimer holds or moved it): not read again.
        v_seen := v_seen || CASE WHEN v_locked = v_want THEN v_page ELSE v_cand_pk END;
    END LOOP;
    IF v_claims > 0 THEN
        -- The head moves to its new rotation place (turns taken in claim
        -- order) and waits in head_waiting until its lease ends or it is
        -- settled; the event becomes inflight with a new generation, its
        -- attempt counted durably before any work starts.
        -- (Each row is reached by its key: = ANY(v_pks) beside the join.)
        UPDATE head SET pass = c.pass, turn = c.turn, dispatch_ms = v_until, runnable = false
        FROM unnest(v_pks, v_passes, v_turns) AS c(pk, pass, turn)
        WHERE head.event_pk = ANY(v_pks) AND head.event_pk = c.pk;
        RETURN QUERY
        WITH e AS (UPDATE event SET state = 'inflight', generation = event.generation + 1,
                       attempts = event.attempts + 1, lifetime_attempts = event.lifetime_attempts + 1,
                       next_at_ms = NULL, lease_until_ms = v_until, owner = p_owner,
                       first_claim_ms = coalesce(event.first_claim_ms, v_now)
                   WHERE event.id = ANY(v_pks)
                   RETURNING event.id, event.event_id, event.flow_id, event.seq, event.body, event.generation,
                             event.attempts, event.lifetime_attempts, event.kind, event.timeout_ms)
        SELECT e.event_id, f.name, e.seq, e.body, e.generation, e.attempts, e.lifetime_attempts, v_until, v_now,
               v_stored, e.kind, e.timeout_ms
        FROM e JOIN unnest(v_pks) WITH ORDINALITY AS c(pk, i) ON c.pk = e.id LEFT JOIN flow AS f ON f.flow_id = e.flow_id
        ORDER BY c.i;
    END IF;
    -- The counters moved (fairq_bookkeep adds up repeated names and skips zeros).
    v_names := ARRAY['ready', 'inflight', 'total_claimed', 'total_expired', 'inflight', 'quarantined',
                     'total_quarantined'] || v_lags;
    v_ns := ARRAY[-v_from_ready, v_from_ready, v_claims, v_expired, -v_quarantined, v_quarantined,
                  v_quarantined]::bigint[] || array_fill(1::bigint, ARRAY[cardinality(v_lags)]);
    -- Heads this claim promoted and left were invisible to claims running
    -- beside it: they look again once it commits. An idle claim stores no
    -- time. Inside an application's transaction (fairq.outbox set): rows of its own.
    PERFORM fairq_bookkeep(v_outbox AND v_claims = 0, p_model AND v_now > v_stored AND (v_promoted > 0 OR v_claims > 0 OR v_expired > 0),
                           v_now, v_claims > 0, v_vtime, v_tail, v_names, v_ns, p_fold,
                           greatest(v_promoted - v_claims, 0), NULL);
END
$$;

-- settle_many in one statement (fairq.stores.postgres.settle has the same steps in
-- Python, for a settle with an effect or joined to an application's
-- transaction): flows locked, then heads, in one order; each item fenced and
-- decided on the rows read afresh; every write a compare-and-set on what was
-- judged. Rows, one per item in order: o_kind 'settled' (o_state, o_next_at,
-- o_attempts), or 'stale' / 'expired' with the stored values the fence saw.
-- A retry decided by a jittered backoff needs the draw made for the stored
-- attempts (p_draw_attempts): when one is missing, nothing is written and
-- the rows are o_kind 'draw' (o_item, o_attempts) for each missing draw.
-- One row with only o_stored: an explicit time before the stored clock.
CREATE OR REPLACE FUNCTION fairq_settle(p_ids text[], p_gens bigint[], p_outcomes text[], p_reasons text[],
                                        p_delays bigint[], p_draws float8[], p_draw_attempts integer[],
                                        p_model boolean, p_requested bigint, p_explicit boolean,
                                        p_max_attempts integer, p_base float8, p_factor float8, p_cap float8,
                                        p_jitter boolean, p_fold integer)
RETURNS TABLE (o_kind text, o_event_id text, o_state text, o_next_at bigint, o_attempts integer,
               o_generation bigint, o_lease_until bigint, o_in_batch boolean, o_item integer, o_now bigint,
               o_stored bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now bigint;
    v_stored bigint;
    v_max integer;
    v_base float8;
    v_factor float8;
    v_cap float8;
    v_jitter boolean;
    v_i integer;
    v_settled text[] := '{}';
    v_need boolean := false;
    v_verdict text;
    v_found boolean;
    r record;
    d record;
    v_out text[] := '{}';
    v_out_state text[] := '{}';
    v_out_next bigint[] := '{}';
    v_out_attempts integer[] := '{}';
    v_out_gen bigint[] := '{}';
    v_out_until bigint[] := '{}';
    v_out_batch boolean[] := '{}';
    v_ack_pk bigint[] := '{}';
    v_ack_gen bigint[] := '{}';
    v_ack_until bigint[] := '{}';
    v_ack_flow bigint[] := '{}';
    v_ack_seq bigint[] := '{}';
    v_ack_pass bigint[] := '{}';
    v_ack_turn bigint[] := '{}';
    v_rdy_pk bigint[] := '{}';
    v_rdy_gen bigint[] := '{}';
    v_rdy_until bigint[] := '{}';
    v_rdy_at bigint[] := '{}';
    v_rdy_reason text[] := '{}';
    v_rdy_keep boolean[] := '{}';
    v_q_pk bigint[] := '{}';
    v_q_gen bigint[] := '{}';
    v_q_until bigint[] := '{}';
    v_q_reason text[] := '{}';
    v_a_id text[] := '{}';
    v_a_action text[] := '{}';
    v_a_reason text[] := '{}';
    v_a_actor text[] := '{}';
    v_a_gen bigint[] := '{}';
    v_a_detail text[] := '{}';
    v_changed integer;
    v_ready integer := 0;
    v_due bigint;
    v_names text[] := '{}';
    v_ns bigint[] := '{}';
    v_retried integer := 0;
    v_freed bigint[] := '{}';
    v_own_max integer;
    v_own_base float8;
    v_own_factor float8;
    v_own_cap float8;
    v_own_jitter boolean;
BEGIN
    SELECT t.call_ms, t.stored_ms INTO v_now, v_stored FROM fairq_call_time(p_model, p_requested, p_explicit) AS t;
    IF v_now IS NULL THEN
        o_stored := v_stored;
        RETURN NEXT;
        RETURN;
    END IF;
    -- The one policy row: as stored now.
    SELECT coalesce(p_max_attempts, p.max_attempts), coalesce(p_base, p.backoff_base_s),
           coalesce(p_factor, p.backoff_factor), coalesce(p_cap, p.backoff_cap_s), coalesce(p_jitter, p.backoff_jitter)
    INTO v_max, v_base, v_factor, v_cap, v_jitter FROM policy AS p WHERE p.id = 1;
    -- The flow serialises "ack of its last event" against "enqueue finds no head".
    PERFORM FROM flow WHERE flow_id = ANY(ARRAY(SELECT e.flow_id FROM event AS e WHERE e.event_id = ANY(p_ids)))
    ORDER BY flow_id FOR NO KEY UPDATE;
    -- The heads judged, locked in event order: a claim skips them, a settle waits.
    PERFORM FROM head WHERE event_pk = ANY(ARRAY(SELECT e.id FROM event AS e WHERE e.event_id = ANY(p_ids)))
    ORDER BY event_pk FOR UPDATE;
    FOR v_i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
        -- The row as it is now, under the locks.
        SELECT e.id, e.flow_id, e.seq, e.state, e.generation, e.attempts, e.lifetime_attempts, e.lease_until_ms,
               e.owner, h.pass, h.turn, h.tenant_id, h.runnable, e.max_attempts, e.backoff
        INTO r FROM event AS e LEFT JOIN head AS h ON h.event_pk = e.id WHERE e.event_id = p_ids[v_i];
        v_found := FOUND;
        IF v_found AND r.runnable THEN
            -- A claim (whose clock read may come after this call's) has seen
            -- this lease end and put its head back in the rotation: this
            -- call runs no earlier than that, so the holder hears it expired.
            v_now := greatest(v_now, r.lease_until_ms);
        END IF;
        v_verdict := fairq_fence(p_gens[v_i], v_now, CASE WHEN v_found THEN r.state END,
                                 CASE WHEN v_found THEN r.generation END,
                                 CASE WHEN v_found THEN r.lease_until_ms END, p_ids[v_i] = ANY(v_settled));
        IF v_verdict IS NOT NULL THEN
            v_out := v_out || v_verdict;
            v_out_state := v_out_state || CASE WHEN v_found THEN r.state END;
            v_out_next := v_out_next || NULL::bigint;
            v_out_attempts := v_out_attempts || NULL::integer;
            v_out_gen := v_out_gen || CASE WHEN v_found THEN r.generation END;
            v_out_until := v_out_until || CASE WHEN v_found THEN r.lease_until_ms END;
            v_out_batch := v_out_batch || (p_ids[v_i] = ANY(v_settled));
            CONTINUE;
        END IF;
        v_settled := v_settled || p_ids[v_i];
        IF r.tenant_id IS NOT NULL THEN
            v_freed := v_freed || r.tenant_id;  -- it leaves inflight: a slot of its tenant is free
        END IF;
        -- Judged by the event's own budget and backoff where it has them
        -- (the policy's alone: no call made for an event without them).
        IF r.max_attempts IS NULL AND r.backoff IS NULL THEN
            v_own_max := v_max;
            v_own_base := v_base;
            v_own_factor := v_factor;
            v_own_cap := v_cap;
            v_own_jitter := v_jitter;
        ELSE
            SELECT o.o_max_attempts, o.o_base, o.o_factor, o.o_cap, o.o_jitter
            INTO v_own_max, v_own_base, v_own_factor, v_own_cap, v_own_jitter
            FROM fairq_own_budget(r.max_attempts, r.backoff, v_max, v_base, v_factor, v_cap, v_jitter) AS o;
        END IF;
        IF p_outcomes[v_i] = 'retry' AND p_delays[v_i] IS NULL AND v_own_jitter AND r.attempts < v_own_max
           AND p_draw_attempts[v_i] IS DISTINCT FROM r.attempts THEN
            -- The jitter draw is made for the attempts stored: ask for it.
            v_need := true;
            o_kind := 'draw';
            o_item := v_i - 1;
            o_attempts := r.attempts;
            RETURN NEXT;
            CONTINUE;
        END IF;
        d := fairq_decide(p_outcomes[v_i], r.attempts, v_own_max, v_now, p_delays[v_i], v_own_base,
                          v_own_factor, v_own_cap, v_own_jitter, p_draws[v_i]);
        v_out := v_out || 'settled'::text;
        v_out_state := v_out_state || d.o_state;
        v_out_next := v_out_next || d.o_next_at;
        v_out_attempts := v_out_attempts || d.o_attempts;
        v_out_gen := v_out_gen || NULL::bigint;
        v_out_until := v_out_until || NULL::bigint;
        v_out_batch := v_out_batch || false;
        IF d.o_state = 'acked' THEN
            v_ack_pk := v_ack_pk || r.id;
            v_ack_gen := v_ack_gen || r.generation;
            v_ack_until := v_ack_until || r.lease_until_ms;
            v_ack_flow := v_ack_flow || r.flow_id;
            v_ack_seq := v_ack_seq || r.seq;
            v_ack_pass := v_ack_pass || r.pass;
            v_ack_turn := v_ack_turn || r.turn;
        ELSIF d.o_state = 'ready' THEN
            v_rdy_pk := v_rdy_pk || r.id;
            v_rdy_gen := v_rdy_gen || r.generation;
            v_rdy_until := v_rdy_until || r.lease_until_ms;
            v_rdy_at := v_rdy_at || d.o_next_at;
            v_rdy_reason := v_rdy_reason || p_reasons[v_i];
            v_rdy_keep := v_rdy_keep || (p_outcomes[v_i] <> 'release');
            IF p_outcomes[v_i] <> 'release' THEN
                v_retried := v_retried + 1;
                v_a_id := v_a_id || p_ids[v_i];
                v_a_action := v_a_action || 'retry'::text;
                v_a_reason := v_a_reason || p_reasons[v_i];
                v_a_actor := v_a_actor || r.owner;
                v_a_gen := v_a_gen || r.generation;
                v_a_detail := v_a_detail || ('{"attempts":' || r.attempts || ',"next_at":'
                                             || fairq_seconds_json(d.o_next_at) || '}');
            END IF;
        ELSE
            v_q_pk := v_q_pk || r.id;
            v_q_gen := v_q_gen || r.generation;
            v_q_until := v_q_until || r.lease_until_ms;
            v_q_reason := v_q_reason || coalesce(nullif(p_reasons[v_i], ''), d.o_cause);
            v_a_id := v_a_id || p_ids[v_i];
            v_a_action := v_a_action || 'quarantine'::text;
            v_a_reason := v_a_reason || coalesce(nullif(p_reasons[v_i], ''), d.o_cause);
            v_a_actor := v_a_actor || r.owner;
            v_a_gen := v_a_gen || r.generation;
            v_a_detail := v_a_detail || ('{"attempts":' || r.attempts || ',"cause":"' || d.o_cause
                                         || '","lifetime_attempts":' || r.lifetime_attempts || '}');
        END IF;
    END LOOP;
    IF v_need THEN
        RETURN;  -- nothing written: the caller sends the draws asked for
    END IF;
    IF cardinality(v_ack_pk) > 0 THEN
        -- Acked is final (compare-and-set on generation, state and lease end;
        -- each row reached by its key: = ANY beside the join).
        UPDATE event AS e SET state = 'acked', lease_until_ms = NULL, settled_ms = v_now
        FROM unnest(v_ack_pk, v_ack_gen, v_ack_until) AS c(pk, gen, until)
        WHERE e.id = ANY(v_ack_pk) AND e.id = c.pk AND e.generation = c.gen AND e.state = 'inflight'
              AND e.lease_until_ms = c.until;
        GET DIAGNOSTICS v_changed = ROW_COUNT;
        IF v_changed <> cardinality(v_ack_pk) THEN
            RAISE EXCEPTION 'a settled event changed under its lock; nothing was written';
        END IF;
        -- The event leaves its head row for good.
        DELETE FROM head WHERE event_pk = ANY(v_ack_pk);
        -- The next event that is not final (the next seq, past any
        -- discarded ones) becomes the head and inherits the flow's rotation
        -- place; no such event: the flow is idle now. A tenanted head waits
        -- for the next claim to make it runnable (and count it on its
        -- tenant): a settle never writes the tenant row for it. In a paused
        -- flow it stays out of the rotation (flow.paused, under the flow lock).
        -- The discarded events it passes leave the flow's count of them
        -- (written only for a flow that has any).
        WITH nx AS (SELECT c.flow, c.seq AS old_seq, c.pass, c.turn, f.paused, f.skipped, e.id, e.seq,
                           e.next_at_ms, e.tenant_id
                    FROM unnest(v_ack_flow, v_ack_seq, v_ack_pass, v_ack_turn) AS c(flow, seq, pass, turn)
                    JOIN flow AS f ON f.flow_id = c.flow
                    LEFT JOIN LATERAL (SELECT x.id, x.seq, x.next_at_ms, x.tenant_id FROM event AS x
                                       WHERE x.flow_id = c.flow AND x.seq > c.seq
                                             AND x.state NOT IN ('acked', 'discarded')
                                       ORDER BY x.seq LIMIT 1) AS e ON true
                    WHERE c.flow IS NOT NULL),
             sk AS (UPDATE flow AS f SET skipped = CASE WHEN nx.id IS NULL THEN 0
                                                        ELSE f.skipped - (nx.seq - nx.old_seq - 1) END
                    FROM nx WHERE nx.skipped > 0 AND f.flow_id = nx.flow),
             n AS (INSERT INTO head (event_pk, flow_id, pass, turn, dispatch_ms, runnable, tenant_id, paused)
                   SELECT nx.id, nx.flow, nx.pass, nx.turn, nx.next_at_ms,
                          nx.next_at_ms <= v_now AND nx.tenant_id IS NULL AND NOT nx.paused, nx.tenant_id, nx.paused
                   FROM nx WHERE nx.id IS NOT NULL
                   RETURNING head.runnable, head.dispatch_ms, head.paused)
        SELECT count(*) FILTER (WHERE n.dispatch_ms <= v_now AND NOT n.paused),
               min(n.dispatch_ms) FILTER (WHERE n.dispatch_ms > v_now AND NOT n.paused)
        INTO v_ready, v_due FROM n;
    END IF;
    IF cardinality(v_rdy_pk) > 0 THEN
        -- Back to ready (compare-and-set on generation, state and lease end):
        -- still the head, claimable again from next_at. A release gives its
        -- claim back to the round's budget (lifetime_attempts keeps it).
        UPDATE event AS e SET state = 'ready', lease_until_ms = NULL, next_at_ms = c.at,
            reason = CASE WHEN c.keep THEN c.reason ELSE e.reason END,
            attempts = CASE WHEN c.keep THEN e.attempts ELSE e.attempts - 1 END
        FROM unnest(v_rdy_pk, v_rdy_gen, v_rdy_until, v_rdy_at, v_rdy_reason, v_rdy_keep)
             AS c(pk, gen, until, at, reason, keep)
        WHERE e.id = ANY(v_rdy_pk) AND e.id = c.pk AND e.generation = c.gen AND e.state = 'inflight'
              AND e.lease_until_ms = c.until;
        GET DIAGNOSTICS v_changed = ROW_COUNT;
        IF v_changed <> cardinality(v_rdy_pk) THEN
            RAISE EXCEPTION 'a settled event changed under its lock; nothing was written';
        END IF;
        -- (A tenanted head waits for the next claim to make it runnable; a
        -- paused flow's stays out of the rotation.)
        WITH u AS (UPDATE head AS h SET dispatch_ms = c.at, runnable = c.at <= v_now AND h.tenant_id IS NULL
                                                                        AND NOT h.paused
                   FROM unnest(v_rdy_pk, v_rdy_at) AS c(pk, at) WHERE h.event_pk = ANY(v_rdy_pk) AND h.event_pk = c.pk
                   RETURNING h.dispatch_ms, h.paused)
        SELECT v_ready + count(*) FILTER (WHERE u.dispatch_ms <= v_now AND NOT u.paused),
               least(v_due, min(u.dispatch_ms) FILTER (WHERE u.dispatch_ms > v_now AND NOT u.paused))
        INTO v_ready, v_due FROM u;
    END IF;
    IF cardinality(v_q_pk) > 0 THEN
        -- Each judged event is still inflight at the generation and lease end read.
        SELECT count(*) INTO v_changed FROM event AS e
        JOIN unnest(v_q_pk, v_q_gen, v_q_until) AS c(pk, gen, until)
             ON e.id = c.pk AND e.generation = c.gen AND e.lease_until_ms = c.until AND e.state = 'inflight'
        WHERE e.id = ANY(v_q_pk);
        IF v_changed <> cardinality(v_q_pk) THEN
            RAISE EXCEPTION 'a settled event changed under its lock; nothing was written';
        END IF;
        -- A quarantined head keeps its rotation place and keeps blocking its
        -- flow, but leaves both dispatch indexes.
        UPDATE event AS e SET state = 'quarantined', lease_until_ms = NULL, next_at_ms = NULL, reason = c.reason
        FROM unnest(v_q_pk, v_q_reason) AS c(pk, reason) WHERE e.id = ANY(v_q_pk) AND e.id = c.pk;
        UPDATE head SET dispatch_ms = NULL, runnable = false WHERE event_pk = ANY(v_q_pk);
    END IF;
    -- Audit rows are appended, never changed; in the order judged.
    INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail)
    SELECT a.event_id, a.action, a.reason, a.actor, a.generation, v_now, a.detail
    FROM unnest(v_a_id, v_a_action, v_a_reason, v_a_actor, v_a_gen, v_a_detail)
         WITH ORDINALITY AS a(event_id, action, reason, actor, generation, detail, i) ORDER BY a.i;
    -- The counters moved, in one assignment (fairq_bookkeep skips those at 0).
    v_names := ARRAY['inflight', 'acked', 'total_acked', 'ready', 'total_retried', 'quarantined',
                     'total_quarantined'];
    v_ns := ARRAY[-cardinality(v_ack_pk) - cardinality(v_rdy_pk) - cardinality(v_q_pk), cardinality(v_ack_pk),
                  cardinality(v_ack_pk), cardinality(v_rdy_pk), v_retried, cardinality(v_q_pk),
                  cardinality(v_q_pk)];
    -- Holds of the tenants whose events left inflight end (a slot is free).
    IF cardinality(v_freed) > 0 THEN
        PERFORM fairq_tenants_touched('{}', '{}', v_freed);
    END IF;
    PERFORM fairq_tell_waiters(v_settled);
    -- A wake-up makes waiters look again at the earliest time: no due notice
    -- beside it. A call that settled nothing (every lease lost) writes
    -- nothing: a single settle raises, and its time is not stored.
    PERFORM fairq_bookkeep(coalesce(current_setting('fairq.outbox', true), '') = 'on',
                           p_model AND v_now > v_stored AND cardinality(v_settled) > 0, v_now, false, 0, 0,
                           v_names, v_ns, p_fold,
                           v_ready, CASE WHEN v_ready > 0 THEN NULL ELSE v_due END);
    RETURN QUERY
    SELECT o.kind, p_ids[o.i::integer], o.state, o.next_at, o.attempts, o.gen, o.until, o.in_batch,
           (o.i - 1)::integer, v_now, v_stored
    FROM unnest(v_out, v_out_state, v_out_next, v_out_attempts, v_out_gen, v_out_until, v_out_batch)
         WITH ORDINALITY AS o(kind, state, next_at, attempts, gen, until, in_batch, i)
    ORDER BY o.i;
END
$$;

-- extend in one statement (fairq.stores.postgres.settle.extend in Python): the
-- head locked, the lease fenced, its end moved to now + lease (p_lease_ms
-- NULL: the stored policy's). One row: o_kind 'extended' with the lease, or
-- 'stale' / 'expired' with the stored values; o_kind NULL: the time refused.
-- (o_kind is the answer's kind; o_ev_kind the event's, a task name.)
CREATE OR REPLACE FUNCTION fairq_extend(p_id text, p_gen bigint, p_model boolean, p_requested bigint,
                                        p_explicit boolean, p_lease_ms bigint)
RETURNS TABLE (o_kind text, o_flow text, o_seq bigint, o_body text, o_generation bigint, o_attempts integer,
               o_lifetime integer, o_owner text, o_lease_until bigint, o_state text, o_now bigint,
               o_stored bigint, o_ev_kind text, o_timeout_ms bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now bigint;
    v_stored bigint;
    v_until bigint;
    v_found boolean;
    r record;
BEGIN
    SELECT t.call_ms, t.stored_ms INTO v_now, v_stored FROM fairq_call_time(p_model, p_requested, p_explicit) AS t;
    IF v_now IS NULL THEN
        o_stored := v_stored;
        RETURN NEXT;
        RETURN;
    END IF;
    -- The head judged, locked: a claim skips it, a settle waits.
    PERFORM FROM head WHERE event_pk = (SELECT e.id FROM event AS e WHERE e.event_id = p_id) FOR UPDATE;
    SELECT e.id, e.state, e.generation, e.lease_until_ms, h.runnable INTO r
    FROM event AS e LEFT JOIN head AS h ON h.event_pk = e.id WHERE e.event_id = p_id;
    v_found := FOUND;
    IF v_found AND r.runnable THEN
        v_now := greatest(v_now, r.lease_until_ms);  -- a claim saw its lease end (as in fairq_settle)
    END IF;
    o_kind := fairq_fence(p_gen, v_now, CASE WHEN v_found THEN r.state END, CASE WHEN v_found THEN r.generation END,
                          CASE WHEN v_found THEN r.lease_until_ms END, false);
    IF o_kind IS NOT NULL THEN
        o_state := CASE WHEN v_found THEN r.state END;
        o_generation := CASE WHEN v_found THEN r.generation END;
        o_lease_until := CASE WHEN v_found THEN r.lease_until_ms END;
        o_now := v_now;
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT v_now + coalesce(p_lease_ms, p.lease_ms) INTO v_until FROM policy AS p WHERE p.id = 1;
    -- Only the current holder's lease moves (compare-and-set on generation,
    -- state and lease end); the head's dispatch time follows it.
    UPDATE event AS e SET lease_until_ms = v_until WHERE e.id = r.id AND e.generation = r.generation
        AND e.state = 'inflight' AND e.lease_until_ms = r.lease_until_ms
    RETURNING 'extended', (SELECT f.name FROM flow AS f WHERE f.flow_id = e.flow_id), e.seq, e.body, e.generation,
              e.attempts, e.lifetime_attempts, e.owner, e.lease_until_ms, e.state, v_now, v_stored, e.kind,
              e.timeout_ms
    INTO o_kind, o_flow, o_seq, o_body, o_generation, o_attempts, o_lifetime, o_owner, o_lease_until, o_state,
         o_now, o_stored, o_ev_kind, o_timeout_ms;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'event % changed under its lock; nothing was written', p_id;
    END IF;
    UPDATE head SET dispatch_ms = v_until WHERE event_pk = r.id;
    PERFORM fairq_bookkeep(false, p_model AND v_now > v_stored, v_now, false, 0, 0, '{}', '{}', p_fold => 0,
                           p_ready => 0, p_due => NULL);
    RETURN NEXT;
END
$$;
