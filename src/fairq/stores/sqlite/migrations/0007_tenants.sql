-- Schema step 7 (user_version 6 -> 7): tenants. A tenant groups flows (a
-- customer's) that share one place in the rotation (table tenant); a flow
-- and each event name theirs (flow.tenant_id, event.tenant_id: NULL for all
-- events stored before, so every queue claims exactly as it did). The
-- rotation index keeps the heads of no tenant; the heads of tenants get
-- indexes of their own. The audit log records tenant changes (action
-- 'set_tenant'): the audit table is rebuilt as in step 4 to widen its CHECK;
-- rows keep their ids.

-- A tenant: a group of flows (a customer's) that shares one place in the
-- rotation, by its weight, whatever its number of flows (fairq.kernel.tenants).
-- Created on first use (an enqueue naming it, or set_tenant); never removed.
CREATE TABLE tenant (
    tenant_id     INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    weight        INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),  -- claims per rotation round
    max_inflight  INTEGER NOT NULL DEFAULT 0 CHECK (max_inflight >= 0),  -- leased at once; 0: no limit
    rate          INTEGER NOT NULL DEFAULT 0 CHECK (rate >= 0),          -- claims per second; 0: no limit
    burst         INTEGER NOT NULL DEFAULT 0 CHECK (burst >= 0),         -- claims at once from a full bucket
    -- The tenant's place among tenants (the queue's vtime, tail and turn counter):
    pass          INTEGER NOT NULL DEFAULT 0 CHECK (pass >= 0),
    turn          INTEGER NOT NULL DEFAULT 0 CHECK (turn >= 0),
    -- The rotation among the tenant's own flows: its heads join at tail.
    vtime         INTEGER NOT NULL DEFAULT 0 CHECK (vtime >= 0),
    tail          INTEGER NOT NULL DEFAULT 0 CHECK (tail >= vtime),
    -- How many of its heads are runnable, and of its events are ready: every
    -- verb that changes a head's runnable flag or an event's state adds its
    -- change here, in the same transaction.
    runnable      INTEGER NOT NULL DEFAULT 0 CHECK (runnable >= 0),
    ready_n       INTEGER NOT NULL DEFAULT 0 CHECK (ready_n >= 0),
    -- A claim found it at a limit: skipped until then (0: not held). A settle
    -- of one of its leases lets it go at once (a slot may be free).
    held_until_ms INTEGER NOT NULL DEFAULT 0 CHECK (held_until_ms >= 0),
    -- Its token bucket (fairq.kernel.tenants.Bucket) after its last claim; NULL: full.
    tokens_milli  INTEGER,
    at_ms         INTEGER,
    CHECK ((tokens_milli IS NULL) = (at_ms IS NULL)),
    CHECK (rate <= burst * 1000)
) STRICT;
-- Tenants a claim may choose from (a runnable head, not held), in rotation order.
CREATE INDEX tenant_rotation ON tenant (pass, turn) WHERE runnable > 0 AND held_until_ms = 0;
-- Held tenants by the end of their hold: a claim lets the ended ones go.
CREATE INDEX tenant_held ON tenant (held_until_ms) WHERE held_until_ms > 0;

ALTER TABLE flow ADD COLUMN tenant_id INTEGER REFERENCES tenant (tenant_id);
-- Each tenant's flows (a listing of tenants counts them).
CREATE INDEX flow_tenant ON flow (tenant_id) WHERE tenant_id IS NOT NULL;
-- Not a foreign key: tenants are never removed (as in queue.sql).
ALTER TABLE event ADD COLUMN tenant_id INTEGER;

-- Every runnable head has no tenant yet: the rotation index keeps its
-- entries, in the same order, under its new condition.
DROP INDEX event_rotation;
-- Heads without a tenant claimable now, in rotation order.
CREATE INDEX event_rotation ON event (pass, turn) WHERE runnable = 1 AND tenant_id IS NULL;
-- Each tenant's heads claimable now, in its own rotation order.
CREATE INDEX event_tenant_rotation ON event (tenant_id, pass, turn) WHERE tenant_id IS NOT NULL AND runnable = 1;
-- Each tenant's heads, by lease end (NULL unless leased; every leased event
-- is a head): whether a tenant has any head, and its live leases counted.
CREATE INDEX event_tenant_heads ON event (tenant_id, lease_until_ms) WHERE tenant_id IS NOT NULL AND pass IS NOT NULL;

CREATE TEMP TABLE audit_before_step_7 AS SELECT * FROM main.audit;
DROP TABLE main.audit;

-- Decisions that explain an event's history: retries, quarantines, expired
-- leases, redrives, misfired schedule slots; and clock resets, policy
-- changes and tenant changes, which concern the whole queue. Rows are only ever appended.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL,          -- not a foreign key: a misfired slot has no event; '' for the whole queue
    action      TEXT NOT NULL CHECK (action = 'retry' OR action = 'quarantine' OR action = 'expired'
                                     OR action = 'redrive' OR action = 'misfire' OR action = 'clock_reset'
                                     OR action = 'policy_set' OR action = 'set_tenant'),
    reason      TEXT,
    actor       TEXT,                   -- who decided (redrive), or the lease owner
    generation  INTEGER,                -- the event's generation after the decision
    at_ms       INTEGER NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}'  -- JSON object: what else explains the decision
) STRICT;

-- Every row comes back with its id, in id order.
INSERT INTO main.audit (id, event_id, action, reason, actor, generation, at_ms, detail)
SELECT id, event_id, action, reason, actor, generation, at_ms, detail FROM audit_before_step_7 ORDER BY id;
DROP TABLE audit_before_step_7;
CREATE INDEX audit_event ON audit (event_id, id);
