-- fairq PostgreSQL schema, version 8: operators' decisions on the record.
-- An event can be discarded (final like acked: settled_ms is set, a purge
-- tombstones it), a flow can be paused (its head leaves the rotation until
-- it is resumed), and both are audited. Every existing row stays as it is:
-- no event is discarded and no flow is paused after the upgrade.
-- Written to be applied again harmlessly, as an upgrade that finds this
-- version unrecorded does.

-- The state checks that name 'acked' (the list of states, and "settled
-- exactly when final"), whatever names PostgreSQL gave them, give way to
-- named ones that know 'discarded'.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'event'::regclass AND contype = 'c'
                   AND pg_get_constraintdef(oid) LIKE '%acked%'
                   AND conname NOT IN ('event_state_known', 'event_settled_when_final')
    LOOP
        EXECUTE format('ALTER TABLE event DROP CONSTRAINT %I', c.conname);
    END LOOP;
END
$$;
ALTER TABLE event DROP CONSTRAINT IF EXISTS event_state_known;
ALTER TABLE event ADD CONSTRAINT event_state_known
    CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined', 'discarded'));
-- An acked or discarded event is final: it has the time it was settled; no other has.
ALTER TABLE event DROP CONSTRAINT IF EXISTS event_settled_when_final;
ALTER TABLE event ADD CONSTRAINT event_settled_when_final
    CHECK ((state IN ('acked', 'discarded')) = (settled_ms IS NOT NULL));

-- A flow's pause: while paused, its head is never claimed. Who paused it,
-- why and when (the queue's clock).
ALTER TABLE flow ADD COLUMN IF NOT EXISTS paused boolean NOT NULL DEFAULT false;
ALTER TABLE flow ADD COLUMN IF NOT EXISTS pause_reason text;
ALTER TABLE flow ADD COLUMN IF NOT EXISTS pause_actor text;
ALTER TABLE flow ADD COLUMN IF NOT EXISTS paused_ms bigint;
-- How many discarded events wait behind the flow's head, for its head to
-- pass them: its backlog (next_seq - the head's seq) less these, without
-- reading the flow's events (no index on event names its state, so claims
-- and settles stay heap-only updates).
ALTER TABLE flow ADD COLUMN IF NOT EXISTS skipped bigint NOT NULL DEFAULT 0 CHECK (skipped >= 0);

-- A head of a paused flow (head.paused = its flow's paused) is out of the
-- rotation: never runnable, and not in head_waiting, so neither a claim's
-- promotion nor a sleeping worker's due time ever reads it; its dispatch
-- time is kept, so a resume puts it back as it would be.
ALTER TABLE head ADD COLUMN IF NOT EXISTS paused boolean NOT NULL DEFAULT false;
ALTER TABLE head DROP CONSTRAINT IF EXISTS head_paused_not_runnable;
ALTER TABLE head ADD CONSTRAINT head_paused_not_runnable CHECK (NOT (paused AND runnable));
DROP INDEX IF EXISTS head_waiting;
CREATE INDEX head_waiting ON head (dispatch_ms) WHERE NOT runnable AND dispatch_ms IS NOT NULL AND NOT paused;
-- Paused flows' heads: stats counts them among blocked flows.
CREATE INDEX IF NOT EXISTS head_paused ON head (event_pk) WHERE paused;

-- discard, pause and resume append audit rows.
ALTER TABLE audit DROP CONSTRAINT IF EXISTS audit_action_check;
ALTER TABLE audit ADD CONSTRAINT audit_action_check
    CHECK (action IN ('retry', 'quarantine', 'expired', 'redrive', 'misfire', 'clock_reset', 'policy_set',
                      'set_tenant', 'discard', 'pause', 'resume'));
