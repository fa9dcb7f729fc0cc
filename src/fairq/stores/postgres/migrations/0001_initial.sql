-- fairq PostgreSQL schema, version 1. Every table lives in the connection's
-- current schema (unqualified names), so one database can hold many queues,
-- one per schema. Times are integer milliseconds of the queue's clock: the
-- server's (clock_timestamp()) or, with clock="model", the stored one below.
--
-- Events are the big table: identity, body and lease columns, with only the
-- primary key, the event_id and the (flow, seq) keys as indexes, so that
-- claim and settle updates stay HOT. Dispatch lives on the narrow head table:
-- one row per flow with unacked work (and one per unordered event), with the
-- partial indexes a claim reads; nothing that waits behind a head costs a claim.

-- The stored clock (one row), used only with clock="model": the highest time
-- any write has used; goes back only by reset_clock. A model-clock write locks
-- it first, which serialises writers as SQLite's single writer does.
CREATE TABLE queue_clock (
    id      integer PRIMARY KEY CHECK (id = 1),
    now_ms  bigint NOT NULL
);
INSERT INTO queue_clock VALUES (1, 0);

-- The rotation counters as a sharded max-register: each claim raises one
-- shard with greatest(); readers take max() without locking. No row is one
-- that every transaction must lock.
CREATE TABLE rotation (
    shard  integer PRIMARY KEY,
    vtime  bigint NOT NULL CHECK (vtime >= 0),     -- rotation position of the latest claim
    tail   bigint NOT NULL CHECK (tail >= vtime)   -- highest position handed out; flows join here
);
INSERT INTO rotation SELECT s, 0, 0 FROM generate_series(0, 31) AS s;

-- Orders equal rotation positions: first come, first served.
CREATE SEQUENCE turn_seq;

-- Counts by state, totals, the claim lag histogram and retention's counters,
-- sharded: a transaction adds its changes to one shard; stats sums them.
-- Stats never count events.
CREATE TABLE counter (
    name   text NOT NULL,
    shard  integer NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (name, shard)
);

-- A named ordered lane. Events with flow=None have no row here.
CREATE TABLE flow (
    flow_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name      text NOT NULL UNIQUE,
    weight    integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),  -- claims per rotation round
    next_seq  bigint NOT NULL DEFAULT 1 CHECK (next_seq >= 1)               -- seq the next event gets
);

-- One unit of work. event_id, flow_id, seq and body never change.
CREATE TABLE event (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id          text NOT NULL UNIQUE,
    flow_id           bigint REFERENCES flow (flow_id),  -- NULL: unordered, a flow of its own
    seq               bigint NOT NULL CHECK (seq >= 1),  -- position in its flow, from 1, no gaps
    body              text NOT NULL,                     -- canonical JSON
    state             text NOT NULL CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined')),
    generation        bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),  -- fence: +1 per claim and redrive
    attempts          integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),   -- claims in this round
    lifetime_attempts integer NOT NULL DEFAULT 0 CHECK (lifetime_attempts >= attempts),
    created_ms        bigint NOT NULL,
    due_ms            bigint NOT NULL,   -- when it first became claimable
    next_at_ms        bigint,            -- ready: claimable from here; else NULL
    lease_until_ms    bigint,            -- inflight: the lease ends here; else NULL
    owner             text,
    reason            text,
    first_claim_ms    bigint,
    settled_ms        bigint,
    UNIQUE (flow_id, seq),
    CHECK (flow_id IS NOT NULL OR seq = 1),
    CHECK ((state = 'inflight') = (lease_until_ms IS NOT NULL)),
    CHECK ((state = 'ready') = (next_at_ms IS NOT NULL)),
    CHECK ((state = 'acked') = (settled_ms IS NOT NULL)),
    CHECK (state <> 'inflight' OR generation >= 1)
) WITH (fillfactor = 80);

-- Dispatch: one row per head (a flow's lowest unacked event; every unacked
-- unordered event). Its rotation position (pass, turn) and the time it can
-- next be claimed: next_at while ready, lease end while inflight, NULL while
-- quarantined. runnable: the clock has reached dispatch_ms and a claim has
-- seen it (the rotation index holds exactly these).
CREATE TABLE head (
    event_pk     bigint PRIMARY KEY REFERENCES event (id),
    flow_id      bigint UNIQUE,      -- NULL: an unordered event
    pass         bigint NOT NULL,
    turn         bigint NOT NULL,
    dispatch_ms  bigint,
    runnable     boolean NOT NULL DEFAULT false,
    CHECK (NOT runnable OR dispatch_ms IS NOT NULL)
) WITH (fillfactor = 70);
-- Heads claimable now, in rotation order.
CREATE INDEX head_rotation ON head (pass, turn) WHERE runnable;
-- Heads waiting for a time (delay, backoff, a live lease), by that time.
CREATE INDEX head_waiting ON head (dispatch_ms) WHERE NOT runnable AND dispatch_ms IS NOT NULL;
-- The dead-letter view: quarantined heads.
CREATE INDEX head_quarantined ON head (event_pk) WHERE dispatch_ms IS NULL;

-- Decisions that explain an event's history; rows are only appended.
CREATE TABLE audit (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text NOT NULL,
    action      text NOT NULL CHECK (action IN ('retry', 'quarantine', 'expired', 'redrive', 'misfire',
                                                'clock_reset', 'policy_set')),
    reason      text,
    actor       text,
    generation  bigint,
    at_ms       bigint NOT NULL,
    detail      text NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_event ON audit (event_id, id);

-- A periodic schedule (fairq.schedules), as in the SQLite store.
CREATE TABLE schedule (
    schedule_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    every_ms      bigint CHECK (every_ms > 0),
    cron          text,
    tz            text NOT NULL,
    body          text NOT NULL,
    flow          text,
    start_ms      bigint NOT NULL,
    misfire       text NOT NULL CHECK (misfire IN ('all', 'coalesce', 'skip')),
    grace_ms      bigint CHECK (grace_ms >= 0),
    paused        boolean NOT NULL DEFAULT false,
    last_slot_ms  bigint,
    next_slot_ms  bigint,
    CHECK ((every_ms IS NULL) <> (cron IS NULL)),
    CHECK (every_ms IS NULL OR tz = 'UTC'),
    CHECK (misfire <> 'all' OR grace_ms IS NULL),
    CHECK (misfire <> 'skip' OR grace_ms IS NOT NULL),
    CHECK (next_slot_ms >= start_ms),
    CHECK (next_slot_ms > last_slot_ms)
);
CREATE INDEX schedule_due ON schedule (next_slot_ms) WHERE NOT paused;

-- What is left of a purged acked event: enough to judge a repeat enqueue.
CREATE TABLE tombstone (
    event_id   text PRIMARY KEY,
    flow_id    bigint,
    seq        bigint NOT NULL CHECK (seq >= 1),
    body_hash  bytea NOT NULL,
    acked_ms   bigint NOT NULL
);
CREATE INDEX tombstone_acked ON tombstone (acked_ms);

-- The queue's retry policy (one row), versioned; changed only by set_policy.
CREATE TABLE policy (
    id              integer PRIMARY KEY CHECK (id = 1),
    max_attempts    integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000000),
    lease_ms        bigint NOT NULL CHECK (lease_ms >= 1),
    backoff_base_s  double precision NOT NULL CHECK (backoff_base_s BETWEEN 0 AND 1e11),
    backoff_factor  double precision NOT NULL CHECK (backoff_factor BETWEEN 1 AND 1e11),
    backoff_cap_s   double precision NOT NULL CHECK (backoff_cap_s BETWEEN 0 AND 1e11),
    backoff_jitter  boolean NOT NULL,
    version         integer NOT NULL CHECK (version >= 1)
);
INSERT INTO policy VALUES (1, 5, 30000, 1.0, 2.0, 300.0, true, 1);

-- The receiving end of a relay (fairq.Inbox): table fairq_receipt, in
-- receipts.sql, which this step's transaction runs after it (an Inbox opened
-- where no queue is yet runs it alone).
