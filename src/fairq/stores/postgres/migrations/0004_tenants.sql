-- fairq PostgreSQL schema, version 7: tenants. A tenant groups flows (a
-- customer's) that share one turn in the rotation, whatever their number
-- (fairq.kernel.tenants). A flow or an unordered event without a tenant is its
-- own tenant: its head rotates on head_rotation exactly as before, and every
-- existing head has no tenant, so an upgrade keeps every event's order.
-- Written to be applied again harmlessly (IF NOT EXISTS), as an upgrade
-- that finds this version unrecorded does.

-- One row per tenant, created on first use (an enqueue or set_tenant). Its
-- place at the tenant level (pass, turn: comparable with an untenanted
-- head's, both from the queue's one rotation), its own flow level (vtime,
-- tail), how many of its heads are runnable (exact: every change is
-- runnable +- k under this row's lock), and what holds it back.
CREATE TABLE IF NOT EXISTS tenant (
    tenant_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    weight         integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),  -- turns per round
    max_inflight   integer NOT NULL DEFAULT 0 CHECK (max_inflight >= 0),         -- 0: no cap
    rate           integer NOT NULL DEFAULT 0 CHECK (rate >= 0),                 -- claims per second; 0: none
    burst          integer NOT NULL DEFAULT 0 CHECK (burst >= 0),                -- claims at once
    pass           bigint NOT NULL DEFAULT 0,
    turn           bigint NOT NULL DEFAULT 0,
    vtime          bigint NOT NULL DEFAULT 0 CHECK (vtime >= 0),    -- its flows' rotation position
    tail           bigint NOT NULL DEFAULT 0 CHECK (tail >= vtime), -- its idle flows join here
    runnable       integer NOT NULL DEFAULT 0 CHECK (runnable >= 0),  -- its heads in the rotation now
    -- Skipped by claims until then (0: not held): out of tokens (the next
    -- token's time) or at its cap (its earliest lease end; a settle that
    -- frees a slot sets it to 0 at once).
    held_until_ms  bigint NOT NULL DEFAULT 0 CHECK (held_until_ms >= 0),
    tokens_milli   bigint,   -- the token bucket: thousandths of a token held at at_ms; NULL: full
    at_ms          bigint,
    CHECK ((tokens_milli IS NULL) = (at_ms IS NULL))
);
-- Tenants a claim may pick, in rotation order.
CREATE INDEX IF NOT EXISTS tenant_rotation ON tenant (pass, turn) WHERE runnable > 0 AND held_until_ms = 0;
-- Holds to release, by their end.
CREATE INDEX IF NOT EXISTS tenant_held ON tenant (held_until_ms) WHERE held_until_ms > 0;
-- Tenants in byte order of their names, for listing pages.
CREATE INDEX IF NOT EXISTS tenant_name_bytes ON tenant ((name COLLATE "C"));

-- A named flow belongs to one tenant, fixed by its first event (NULL: none).
ALTER TABLE flow ADD COLUMN IF NOT EXISTS tenant_id bigint REFERENCES tenant (tenant_id);
CREATE INDEX IF NOT EXISTS flow_tenant ON flow (tenant_id) WHERE tenant_id IS NOT NULL;
-- An event's tenant (its flow's; an unordered event's own), kept on the event
-- so a repeat of an acked unordered event is judged by it too.
ALTER TABLE event ADD COLUMN IF NOT EXISTS tenant_id bigint;
-- A head's tenant, copied from its event when the head row is made.
ALTER TABLE head ADD COLUMN IF NOT EXISTS tenant_id bigint;

-- Untenanted heads claimable now, in rotation order (the one-level rotation).
DROP INDEX IF EXISTS head_rotation;
CREATE INDEX head_rotation ON head (pass, turn) WHERE runnable AND tenant_id IS NULL;
-- Each tenant's heads claimable now, in its own rotation order.
CREATE INDEX IF NOT EXISTS head_tenant_rotation ON head (tenant_id, pass, turn) WHERE runnable AND tenant_id IS NOT NULL;
-- A tenant's heads by dispatch time: whether it has any head, and its live
-- leases (not runnable, dispatch time = lease end after now).
CREATE INDEX IF NOT EXISTS head_tenant ON head (tenant_id, dispatch_ms) WHERE tenant_id IS NOT NULL;

-- set_tenant appends an audit row for the whole queue (event_id '').
ALTER TABLE audit DROP CONSTRAINT IF EXISTS audit_action_check;
ALTER TABLE audit ADD CONSTRAINT audit_action_check
    CHECK (action IN ('retry', 'quarantine', 'expired', 'redrive', 'misfire', 'clock_reset', 'policy_set',
                      'set_tenant'));

-- The one-statement enqueue now takes each item's tenant (enqueue.sql); its
-- form without them goes.
DROP FUNCTION IF EXISTS fairq_enqueue(text[], text[], text[], bytea[], bigint[], bigint[], boolean, bigint, boolean,
                                      integer);
