-- Schema step 8 (user_version 7 -> 8): an operator's decisions. An event
-- may be discarded (state 'discarded': final like acked, its flow goes on
-- after it): the event table is rebuilt to widen its CHECKs, every row kept
-- with its id and every index made again. A flow may be paused (flow.paused
-- and why, by whom, since when): its head leaves the dispatch indexes until
-- it is resumed. The audit log records discards, pauses and resumes (rebuilt
-- as in step 7; rows keep their ids). queue_state counts discarded events.

ALTER TABLE flow ADD COLUMN paused INTEGER NOT NULL DEFAULT 0 CHECK (paused = 0 OR paused = 1);
ALTER TABLE flow ADD COLUMN pause_reason TEXT;
ALTER TABLE flow ADD COLUMN pause_actor TEXT;
ALTER TABLE flow ADD COLUMN paused_ms INTEGER;

ALTER TABLE queue_state ADD COLUMN discarded_n INTEGER NOT NULL DEFAULT 0 CHECK (discarded_n >= 0);
ALTER TABLE queue_state ADD COLUMN discarded_total INTEGER NOT NULL DEFAULT 0 CHECK (discarded_total >= 0);

CREATE TEMP TABLE event_before_step_8 AS SELECT * FROM main.event;
DROP TABLE main.event;

-- One unit of work. event_id, flow_id, seq and body never change.
CREATE TABLE event (
    id                INTEGER PRIMARY KEY,
    event_id          TEXT NOT NULL UNIQUE,
    flow_id           INTEGER REFERENCES flow (flow_id),  -- NULL: unordered, a flow of its own
    seq               INTEGER NOT NULL CHECK (seq >= 1),  -- position in its flow, from 1, no gaps
    body              TEXT NOT NULL,                      -- canonical JSON
    -- CHECKs here are written as OR chains, not IN lists: an IN list builds a
    -- temporary table on every row write, which costs more than the write.
    state             TEXT NOT NULL
                      CHECK (state = 'ready' OR state = 'inflight' OR state = 'acked' OR state = 'quarantined'
                             OR state = 'discarded'),
    generation        INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),  -- fence: +1 per claim and redrive
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),    -- claims in this round
    lifetime_attempts INTEGER NOT NULL DEFAULT 0 CHECK (lifetime_attempts >= attempts),  -- never reset
    created_ms        INTEGER NOT NULL,
    due_ms            INTEGER NOT NULL,  -- when it first became claimable (enqueue time + delay)
    next_at_ms        INTEGER,           -- ready: claimable from here (delay, backoff); else NULL
    lease_until_ms    INTEGER,           -- inflight: the lease ends here; else NULL
    owner             TEXT,              -- who holds (or last held) the lease
    reason            TEXT,              -- why it last retried or was quarantined
    first_claim_ms    INTEGER,           -- claim lag = first_claim_ms - due_ms
    settled_ms        INTEGER,           -- when it was acked or discarded
    -- Dispatch, set on heads only (the lowest seq of a flow neither acked nor discarded):
    pass              INTEGER,           -- the flow's rotation position: claims go to the lowest
    turn              INTEGER,           -- tie-break: who reached this position first
    dispatch_ms       INTEGER,           -- when this head can next be claimed; NULL if quarantined or paused
    runnable          INTEGER NOT NULL DEFAULT 0 CHECK (runnable = 0 OR runnable = 1),  -- 1: in a rotation index
    -- The event's tenant: its flow's (copied at enqueue), or its own for an
    -- unordered event; NULL: none (the flow is its own tenant). Never changes.
    -- Not a foreign key: tenants are never removed, and a key would make
    -- every insert of a tenant plan a scan of this table.
    tenant_id         INTEGER,
    CHECK (flow_id IS NOT NULL OR seq = 1),
    CHECK ((state = 'inflight') = (lease_until_ms IS NOT NULL)),
    CHECK ((state = 'ready') = (next_at_ms IS NOT NULL)),
    CHECK ((state = 'acked' OR state = 'discarded') = (settled_ms IS NOT NULL)),
    CHECK (state != 'inflight' OR generation >= 1),
    CHECK ((pass IS NULL) = (turn IS NULL)),
    -- Only heads are leased or quarantined; acked and discarded events are never heads.
    CHECK (pass IS NOT NULL OR state = 'ready' OR state = 'acked' OR state = 'discarded'),
    CHECK ((state != 'acked' AND state != 'discarded') OR pass IS NULL),
    -- A head's dispatch time is its next_at while ready, its lease_until while
    -- inflight; a quarantined head, and the head of a paused flow, have none.
    CHECK (dispatch_ms IS NULL OR (pass IS NOT NULL AND state != 'quarantined')),
    CHECK (dispatch_ms IS NULL OR dispatch_ms = coalesce(next_at_ms, lease_until_ms)),
    CHECK (runnable = 0 OR dispatch_ms IS NOT NULL)
) STRICT;
-- Every row comes back with its id, in id order.
INSERT INTO main.event (id, event_id, flow_id, seq, body, state, generation, attempts, lifetime_attempts, created_ms, due_ms, next_at_ms, lease_until_ms, owner, reason, first_claim_ms, settled_ms, pass, turn, dispatch_ms, runnable, tenant_id)
SELECT id, event_id, flow_id, seq, body, state, generation, attempts, lifetime_attempts, created_ms, due_ms, next_at_ms, lease_until_ms, owner, reason, first_claim_ms, settled_ms, pass, turn, dispatch_ms, runnable, tenant_id FROM event_before_step_8 ORDER BY id;
DROP TABLE event_before_step_8;

-- Seqs of a named flow are unique; the next head is found by (flow_id, seq + 1).
CREATE UNIQUE INDEX event_flow_seq ON event (flow_id, seq) WHERE flow_id IS NOT NULL;
-- Heads waiting for a time (delay, backoff, a live lease), by that time; a
-- claim promotes the ones that are due into the rotation index.
CREATE INDEX event_waiting ON event (dispatch_ms) WHERE runnable = 0 AND dispatch_ms IS NOT NULL;
-- Heads without a tenant claimable now, in rotation order.
CREATE INDEX event_rotation ON event (pass, turn) WHERE runnable = 1 AND tenant_id IS NULL;
-- Each tenant's heads claimable now, in its own rotation order.
CREATE INDEX event_tenant_rotation ON event (tenant_id, pass, turn) WHERE tenant_id IS NOT NULL AND runnable = 1;
-- Each tenant's heads, by lease end (NULL unless leased; every leased event
-- is a head): whether a tenant has any head, and its live leases counted.
CREATE INDEX event_tenant_heads ON event (tenant_id, lease_until_ms) WHERE tenant_id IS NOT NULL AND pass IS NOT NULL;
-- The dead-letter view: quarantined events are few, and operators list them.
CREATE INDEX event_quarantined ON event (id) WHERE state = 'quarantined';
-- The heads of paused flows (out of the dispatch indexes until resumed, as
-- quarantined heads are): stats counts them, resume finds them.
CREATE INDEX event_paused ON event (flow_id) WHERE pass IS NOT NULL AND dispatch_ms IS NULL AND state != 'quarantined';

CREATE TEMP TABLE audit_before_step_8 AS SELECT * FROM main.audit;
DROP TABLE main.audit;

-- Decisions that explain an event's history: retries, quarantines, expired
-- leases, redrives, discards, misfired schedule slots; and clock resets, policy
-- changes, tenant changes and pauses, which concern the whole queue. Rows are only ever appended.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL,          -- not a foreign key: a misfired slot has no event; '' for the whole queue
    action      TEXT NOT NULL CHECK (action = 'retry' OR action = 'quarantine' OR action = 'expired'
                                     OR action = 'redrive' OR action = 'misfire' OR action = 'clock_reset'
                                     OR action = 'policy_set' OR action = 'set_tenant' OR action = 'discard'
                                     OR action = 'pause' OR action = 'resume'),
    reason      TEXT,
    actor       TEXT,                   -- who decided (redrive), or the lease owner
    generation  INTEGER,                -- the event's generation after the decision
    at_ms       INTEGER NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}'  -- JSON object: what else explains the decision
) STRICT;
-- Every row comes back with its id, in id order.
INSERT INTO main.audit (id, event_id, action, reason, actor, generation, at_ms, detail)
SELECT id, event_id, action, reason, actor, generation, at_ms, detail FROM audit_before_step_8 ORDER BY id;
DROP TABLE audit_before_step_8;
CREATE INDEX audit_event ON audit (event_id, id);
