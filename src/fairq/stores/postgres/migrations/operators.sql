-- fairq's server-side operator verbs (since schema version 8): discard and
-- pause/resume, each one statement (its own transaction, one round trip), as
-- verbs.sql makes claim and settle. Applied after verbs.sql by every upgrade
-- (fairq.stores.postgres.schema.FUNCTIONS). Python (fairq.stores.postgres.operators)
-- words the refusals from the stored values these return.

-- discard_many in one statement: flows locked, then heads, in the store's
-- one order (flow_id, then event order), then each item judged alone on its
-- row read afresh, in the order given (an id named twice is judged the
-- second time as the first left it). A ready event (a head, due or waiting,
-- or behind its flow's head) or a quarantined head at the expected
-- generation becomes discarded: final like acked (settled_ms), generation
-- + 1, out of every dispatch index. A discarded head hands its rotation
-- place to its flow's next event that is not final, as an ack does.
-- Rows, one per item in order: o_kind 'discarded' (o_generation: the new
-- one) or 'refused' with the stored values (o_state NULL: no such event).
-- One row with only o_stored: an explicit time before the stored clock.
CREATE OR REPLACE FUNCTION fairq_discard(p_ids text[], p_gens bigint[], p_reason text, p_actor text,
                                         p_model boolean, p_requested bigint, p_explicit boolean, p_fold integer)
RETURNS TABLE (o_kind text, o_state text, o_generation bigint, o_owner text, o_lease_until bigint,
               o_now bigint, o_stored bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now bigint;
    v_stored bigint;
    v_i integer;
    v_ready integer := 0;
    v_due bigint;
    v_from_ready integer := 0;
    v_from_quarantined integer := 0;
    v_less bigint[] := '{}';
    v_found boolean;
    r record;
    n record;
BEGIN
    SELECT t.call_ms, t.stored_ms INTO v_now, v_stored FROM fairq_call_time(p_model, p_requested, p_explicit) AS t;
    IF v_now IS NULL THEN
        o_stored := v_stored;
        RETURN NEXT;
        RETURN;
    END IF;
    -- The flows serialise "a head leaves its flow" against enqueue, ack and
    -- pause (which lock them too); then the heads judged, in event order: a
    -- claim skips them, a settle or redrive waits.
    PERFORM FROM flow WHERE flow_id = ANY(ARRAY(SELECT e.flow_id FROM event AS e WHERE e.event_id = ANY(p_ids)))
    ORDER BY flow_id FOR NO KEY UPDATE;
    PERFORM FROM head WHERE event_pk = ANY(ARRAY(SELECT e.id FROM event AS e WHERE e.event_id = ANY(p_ids)))
    ORDER BY event_pk FOR UPDATE;
    FOR v_i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
        -- The row as it is now, under the locks.
        SELECT e.id, e.flow_id, e.seq, e.state, e.generation, e.attempts, e.owner, e.lease_until_ms, e.reason,
               h.event_pk AS head_pk, h.pass, h.turn, h.runnable, h.tenant_id AS head_tenant
        INTO r FROM event AS e LEFT JOIN head AS h ON h.event_pk = e.id WHERE e.event_id = p_ids[v_i];
        v_found := FOUND;
        IF NOT v_found THEN
            o_kind := 'refused';
            o_state := NULL;
            o_generation := NULL;
            o_owner := NULL;
            o_lease_until := NULL;
            o_now := v_now;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF r.state NOT IN ('ready', 'quarantined') OR r.generation <> p_gens[v_i] THEN
            -- Refused: nothing written for this item; the stored values say why.
            o_kind := 'refused';
            o_state := r.state;
            o_generation := r.generation;
            o_owner := r.owner;
            o_lease_until := r.lease_until_ms;
            o_now := v_now;
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- Final, at the next generation (compare-and-set on what was judged);
        -- the operator's reason replaces the event's.
        UPDATE event SET state = 'discarded', generation = r.generation + 1, next_at_ms = NULL, lease_until_ms = NULL,
            settled_ms = v_now, reason = p_reason
        WHERE id = r.id AND state = r.state AND generation = r.generation;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'event % changed under its lock; nothing was written', p_ids[v_i];
        END IF;
        IF r.state = 'ready' THEN
            v_from_ready := v_from_ready + 1;
        ELSE
            v_from_quarantined := v_from_quarantined + 1;
        END IF;
        -- Audit rows are appended, never changed; the detail keeps the state
        -- before and (quarantined) the reason it replaces, as canonical JSON.
        INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail)
        VALUES (p_ids[v_i], 'discard', p_reason, p_actor, r.generation + 1, v_now,
                '{"attempts":' || r.attempts
                || CASE WHEN r.state = 'quarantined' THEN ',"replaced_reason":' || coalesce(to_json(r.reason)::text, 'null')
                        ELSE '' END
                || ',"state":"' || r.state || '"}');
        IF r.head_pk IS NULL AND r.flow_id IS NOT NULL THEN
            -- Behind its flow's head: one more the head will pass (the flow is locked above).
            UPDATE flow SET skipped = skipped + 1 WHERE flow_id = r.flow_id;
        END IF;
        IF r.head_pk IS NOT NULL THEN
            -- The event leaves its head row; a runnable tenanted head is one fewer on its tenant.
            DELETE FROM head WHERE event_pk = r.id;
            IF r.runnable AND r.head_tenant IS NOT NULL THEN
                v_less := v_less || r.head_tenant;
            END IF;
            -- Its flow's next event that is not final becomes the head in its
            -- rotation place, as after an ack (a tenanted one waits for the
            -- next claim to make it runnable; a paused flow's stays out).
            IF r.flow_id IS NOT NULL THEN
                INSERT INTO head (event_pk, flow_id, pass, turn, dispatch_ms, runnable, tenant_id, paused)
                SELECT x.id, x.flow_id, r.pass, r.turn, x.next_at_ms,
                       x.next_at_ms <= v_now AND x.tenant_id IS NULL AND NOT f.paused, x.tenant_id, f.paused
                FROM event AS x JOIN flow AS f ON f.flow_id = x.flow_id
                WHERE x.flow_id = r.flow_id AND x.seq > r.seq AND x.state NOT IN ('acked', 'discarded')
                ORDER BY x.seq LIMIT 1
                RETURNING head.dispatch_ms, head.paused,
                          (SELECT x2.seq FROM event AS x2 WHERE x2.id = head.event_pk) AS seq INTO n;
                v_found := FOUND;
                -- The discarded events between it and the new head are passed
                -- (none left behind a flow without a head).
                UPDATE flow SET skipped = CASE WHEN v_found THEN skipped - (n.seq - r.seq - 1) ELSE 0 END
                WHERE flow_id = r.flow_id AND skipped > 0;
                IF v_found AND NOT n.paused THEN
                    IF n.dispatch_ms <= v_now THEN
                        v_ready := v_ready + 1;
                    ELSE
                        v_due := least(v_due, n.dispatch_ms);
                    END IF;
                END IF;
            END IF;
        END IF;
        o_kind := 'discarded';
        o_state := 'discarded';
        o_generation := r.generation + 1;
        o_owner := NULL;
        o_lease_until := NULL;
        o_now := v_now;
        RETURN NEXT;
    END LOOP;
    IF cardinality(v_less) > 0 THEN
        PERFORM fairq_tenants_touched(v_less, array_fill(-1, ARRAY[cardinality(v_less)]), '{}');
    END IF;
    PERFORM fairq_tell_waiters(p_ids);  -- whoever waits for an event named here (Queue.wait)
    PERFORM fairq_bookkeep(false, p_model AND v_now > v_stored AND v_from_ready + v_from_quarantined > 0, v_now,
                           false, 0, 0, ARRAY['ready', 'quarantined', 'discarded', 'total_discarded'],
                           ARRAY[-v_from_ready, -v_from_quarantined, v_from_ready + v_from_quarantined,
                                 v_from_ready + v_from_quarantined]::bigint[],
                           p_fold, v_ready, CASE WHEN v_ready > 0 THEN NULL ELSE v_due END);
END
$$;

-- pause and resume in one statement: the flow's row made (pause of a flow
-- never seen) and locked, so enqueue, ack and discard (which lock it too)
-- make no head beside it; then its head, waited for (a claim holding it
-- commits first). Pause: the head leaves the rotation (a runnable tenanted
-- one is one fewer on its tenant) and head_waiting; a lease runs on. Resume:
-- the head is put back as it would be had it never been paused, in its
-- rotation place: runnable if due (a tenanted one is made runnable, and
-- counted, by the next claim's promotion), else waiting at its time.
-- One row: o_changed false (already so: nothing written), or true. One row
-- with only o_stored: an explicit time before the stored clock.
CREATE OR REPLACE FUNCTION fairq_set_paused(p_flow text, p_paused boolean, p_reason text, p_actor text,
                                            p_model boolean, p_requested bigint, p_explicit boolean,
                                            p_fold integer)
RETURNS TABLE (o_changed boolean, o_now bigint, o_stored bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_now bigint;
    v_stored bigint;
    v_flow bigint;
    v_was boolean;
    h record;
    v_ready integer := 0;
    v_due bigint;
BEGIN
    SELECT t.call_ms, t.stored_ms INTO v_now, v_stored FROM fairq_call_time(p_model, p_requested, p_explicit) AS t;
    IF v_now IS NULL THEN
        o_stored := v_stored;
        RETURN NEXT;
        RETURN;
    END IF;
    o_now := v_now;
    IF p_paused THEN
        -- A flow never seen gets its row (its seqs start at 1), as set_weight makes it.
        INSERT INTO flow (name) VALUES (p_flow) ON CONFLICT (name) DO NOTHING;
    END IF;
    SELECT f.flow_id, f.paused INTO v_flow, v_was FROM flow AS f WHERE f.name = p_flow FOR NO KEY UPDATE;
    IF NOT FOUND OR v_was = p_paused THEN
        o_changed := false;
        RETURN NEXT;
        RETURN;
    END IF;
    UPDATE flow SET paused = p_paused, pause_reason = CASE WHEN p_paused THEN p_reason END,
        pause_actor = CASE WHEN p_paused THEN p_actor END, paused_ms = CASE WHEN p_paused THEN v_now END
    WHERE flow_id = v_flow;
    SELECT hd.event_pk, hd.runnable, hd.tenant_id, hd.dispatch_ms INTO h FROM head AS hd
    WHERE hd.flow_id = v_flow FOR UPDATE;
    IF FOUND THEN
        IF p_paused THEN
            UPDATE head SET paused = true, runnable = false WHERE event_pk = h.event_pk;
            IF h.runnable AND h.tenant_id IS NOT NULL THEN
                PERFORM fairq_tenants_touched(ARRAY[h.tenant_id], ARRAY[-1], '{}');
            END IF;
        ELSE
            UPDATE head SET paused = false,
                runnable = coalesce(h.dispatch_ms <= v_now, false) AND h.tenant_id IS NULL
            WHERE event_pk = h.event_pk;
            IF h.dispatch_ms <= v_now THEN
                v_ready := 1;
            ELSIF h.dispatch_ms > v_now THEN
                v_due := h.dispatch_ms;
            END IF;
        END IF;
    END IF;
    -- Audit rows are appended, never changed: one for the whole queue (event_id '').
    INSERT INTO audit (event_id, action, reason, actor, generation, at_ms, detail)
    VALUES ('', CASE WHEN p_paused THEN 'pause' ELSE 'resume' END, p_reason, p_actor, NULL, v_now,
            '{"flow":' || to_json(p_flow)::text || '}');
    PERFORM fairq_bookkeep(false, p_model AND v_now > v_stored, v_now, false, 0, 0, '{}', '{}', p_fold, v_ready, v_due);
    o_changed := true;
    RETURN NEXT;
END
$$;
