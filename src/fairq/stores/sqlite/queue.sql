-- fairq queue schema: the one DDL source for a fresh database.
-- Times are integer milliseconds of the queue's own clock (queue_state.now_ms).
--
-- Dispatch lives on the events themselves: a flow's head carries the flow's
-- rotation position (pass, turn) and the time it can next be claimed
-- (dispatch_ms). Partial indexes hold only heads (waiting for a time;
-- runnable without a tenant; runnable of each tenant), so a claim reads one
-- index entry however many events wait behind heads or however many flows are
-- blocked (a quarantined head, or a paused flow's, is in none of them);
-- events that are not heads are in none of them. Tenants have a
-- rotation of their own (table tenant), which a claim reads the same way.

-- The queue's state row (one only): its stored clock, its rotation counters,
-- the number of events in each state, the totals and the claim lag
-- histogram. Every write transaction updates it once, at the end, with the
-- transitions it made, so stats never counts rows.
CREATE TABLE queue_state (
    id                 INTEGER PRIMARY KEY CHECK (id = 1),
    now_ms             INTEGER NOT NULL,               -- highest time any write has used; goes back only by reset_clock
    vtime              INTEGER NOT NULL CHECK (vtime >= 0),     -- rotation position of the latest claim
    tail               INTEGER NOT NULL CHECK (tail >= vtime),  -- highest position handed out; flows join here
    turn               INTEGER NOT NULL CHECK (turn >= 0),      -- orders equal positions: first come, first served
    -- How many events are in each state now:
    ready_n            INTEGER NOT NULL CHECK (ready_n >= 0),
    inflight_n         INTEGER NOT NULL CHECK (inflight_n >= 0),
    acked_n            INTEGER NOT NULL CHECK (acked_n >= 0),
    quarantined_n      INTEGER NOT NULL CHECK (quarantined_n >= 0),
    -- What has happened since the file was created (counters that only grow):
    enqueued_total     INTEGER NOT NULL CHECK (enqueued_total >= 0),
    claimed_total      INTEGER NOT NULL CHECK (claimed_total >= 0),
    expired_total      INTEGER NOT NULL CHECK (expired_total >= 0),    -- claims that found a dead holder's lease
    acked_total        INTEGER NOT NULL CHECK (acked_total >= 0),
    retried_total      INTEGER NOT NULL CHECK (retried_total >= 0),
    quarantined_total  INTEGER NOT NULL CHECK (quarantined_total >= 0),
    redriven_total     INTEGER NOT NULL CHECK (redriven_total >= 0),
    -- Claim lag (first claim - due) histogram: a JSON array of counts, one per
    -- bucket of fairq.kernel.policy.CLAIM_LAG_BOUNDS_MS, the last one unbounded.
    claim_lag          TEXT NOT NULL
    -- Discarded events now, and discards since the file was created (laid
    -- out as step 8's ALTER TABLE writes them).
, discarded_n INTEGER NOT NULL DEFAULT 0 CHECK (discarded_n >= 0), discarded_total INTEGER NOT NULL DEFAULT 0 CHECK (discarded_total >= 0)) STRICT;
INSERT INTO queue_state VALUES (1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '[]', 0, 0);

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

-- A named ordered lane. Events with flow=None have no row here: each is a
-- flow of its own.
CREATE TABLE flow (
    flow_id   INTEGER PRIMARY KEY,
    name      TEXT NOT NULL UNIQUE,
    weight    INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),  -- claims per rotation round
    next_seq  INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1)               -- seq the next event gets
    -- The flow's tenant (NULL: none), fixed by its first event; whether it
    -- is paused (its head is claimed by no one until resumed), why, by whom
    -- and since when. Laid out as steps 7 and 8's ALTER TABLE write it, so
    -- both files store the same text.
    , tenant_id INTEGER REFERENCES tenant (tenant_id), paused INTEGER NOT NULL DEFAULT 0 CHECK (paused = 0 OR paused = 1), pause_reason TEXT, pause_actor TEXT, paused_ms INTEGER) STRICT;
-- Each tenant's flows (a listing of tenants counts them).
CREATE INDEX flow_tenant ON flow (tenant_id) WHERE tenant_id IS NOT NULL;

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
    -- Then, on its line, the event's kind (a task name; NULL: none) and its own retry
    -- budget, handler timeout and backoff (JSON text; NULL: the queue's
    -- policy), which never change; laid out as step 9's ALTER TABLE writes
    -- them, so both files store the same text.
    tenant_id         INTEGER, kind TEXT, max_attempts INTEGER CHECK (max_attempts >= 1), timeout_ms INTEGER CHECK (timeout_ms >= 1), backoff TEXT,
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
-- Events of each kind in enqueue order (events(kind=...)); an event without
-- a kind has no entry, and no write ever changes an event's kind or id.
CREATE INDEX event_kind ON event (kind, id) WHERE kind IS NOT NULL;

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
CREATE INDEX audit_event ON audit (event_id, id);

-- A periodic schedule (fairq.schedules). Ticks decide its slots in order:
-- every slot up to last_slot_ms became an instance (an event with id
-- "{name}@{slot}") or a misfire (an audit row); next_slot_ms is the next one.
CREATE TABLE schedule (
    schedule_id   INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    every_ms      INTEGER CHECK (every_ms > 0),    -- every=: slots are start_ms + k * every_ms
    cron          TEXT,                            -- cron=: a 5-field expression, read in tz
    tz            TEXT NOT NULL,                   -- IANA time zone of the cron fields
    body          TEXT NOT NULL,                   -- canonical JSON carried by every instance
    flow          TEXT,                            -- the instances' flow; NULL: each is a flow of its own
    start_ms      INTEGER NOT NULL,                -- no slot is earlier
    misfire       TEXT NOT NULL CHECK (misfire = 'all' OR misfire = 'coalesce' OR misfire = 'skip'),
    grace_ms      INTEGER CHECK (grace_ms >= 0),   -- how late a due slot may be found and still run
    paused        INTEGER NOT NULL DEFAULT 0 CHECK (paused = 0 OR paused = 1),
    last_slot_ms  INTEGER,                         -- newest slot decided; NULL: none yet
    next_slot_ms  INTEGER,                         -- next slot to decide; NULL: none is left
    CHECK ((every_ms IS NULL) != (cron IS NULL)),
    CHECK (every_ms IS NULL OR tz = 'UTC'),
    CHECK (misfire != 'all' OR grace_ms IS NULL),
    CHECK (misfire != 'skip' OR grace_ms IS NOT NULL),
    CHECK (next_slot_ms >= start_ms),
    CHECK (next_slot_ms > last_slot_ms)
) STRICT;
-- Unpaused schedules by their next slot: a tick reads only the due ones.
CREATE INDEX schedule_due ON schedule (next_slot_ms) WHERE paused = 0;

-- What is left of a purged acked or discarded event (step 3, retention): enough to judge
-- a repeat enqueue of its id. Tombstones older than the dedup window go.
CREATE TABLE tombstone (
    event_id   TEXT PRIMARY KEY,
    -- The purged event's flow (NULL: a flow of its own). Not a foreign key:
    -- it was checked on the event row, and a key here would make every
    -- enqueue's flow upsert plan a check of this table.
    flow_id    INTEGER,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    body_hash  BLOB NOT NULL,                      -- blake2b-128 of the canonical body
    acked_ms   INTEGER NOT NULL                    -- when it was acked; the dedup window counts from here
) STRICT, WITHOUT ROWID;
-- Only purge writes and reads tombstones by age; no claim or settle touches it.
CREATE INDEX tombstone_acked ON tombstone (acked_ms);

-- Retention's counters (one row), written only by purge.
CREATE TABLE retention (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    tombstones_n  INTEGER NOT NULL CHECK (tombstones_n >= 0),  -- rows in tombstone now
    purged_total  INTEGER NOT NULL CHECK (purged_total >= 0)   -- acked and discarded events purge removed; only grows
) STRICT;
INSERT INTO retention VALUES (1, 0, 0);

-- The queue's retry policy (one row), stored when the file is created so that
-- every process that opens it decides an event's fate the same way. Changed
-- only by Queue.set_policy, which appends an audit row ('policy_set').
CREATE TABLE policy (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    max_attempts    INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000000),  -- claims per round
    lease_ms        INTEGER NOT NULL CHECK (lease_ms >= 1),            -- a claim's lease unless the call gives one
    backoff_base_s  REAL NOT NULL CHECK (backoff_base_s BETWEEN 0 AND 1e11),   -- first retry delay, seconds
    backoff_factor  REAL NOT NULL CHECK (backoff_factor BETWEEN 1 AND 1e11),   -- growth per attempt
    backoff_cap_s   REAL NOT NULL CHECK (backoff_cap_s BETWEEN 0 AND 1e11),    -- longest retry delay, seconds
    backoff_jitter  INTEGER NOT NULL CHECK (backoff_jitter = 0 OR backoff_jitter = 1),
    version         INTEGER NOT NULL CHECK (version >= 1)               -- +1 per change
) STRICT;
-- The defaults; the open that creates the file replaces them with its own values.
INSERT INTO policy VALUES (1, 5, 30000, 1.0, 2.0, 300.0, 1, 1);

-- The result of an acked event (Queue.ack(result=...)), by the event's row id
-- (event.id), written in the ack's transaction. Only an acked event has one; it
-- never changes (an acked event is final), and it goes in the transaction that
-- purges its event.
CREATE TABLE event_result (
    event_pk    INTEGER PRIMARY KEY,  -- event.id of the acked event
    body        TEXT NOT NULL,        -- canonical JSON
    created_ms  INTEGER NOT NULL      -- the ack's time (the queue's clock)
) STRICT;
