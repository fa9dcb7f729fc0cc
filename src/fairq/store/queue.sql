-- fairq queue schema: the one DDL source for a fresh database.
-- A database created from this file must equal one built by applying every
-- step in migrations/ in order (tests/test_schema.py checks it).
-- Times are integer milliseconds of the queue's own clock (see table clock).

-- The queue's singleton bookkeeping row: its clock and its rotation counters.
CREATE TABLE clock (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    now_ms  INTEGER NOT NULL,              -- highest time any write has used; never goes back
    vtime   INTEGER NOT NULL CHECK (vtime >= 0),   -- rotation position of the latest claim
    tail    INTEGER NOT NULL CHECK (tail >= vtime), -- highest position handed out; new flows join here
    turn    INTEGER NOT NULL CHECK (turn >= 0)      -- counter that orders equal positions, first come first served
) STRICT;
INSERT INTO clock (id, now_ms, vtime, tail, turn) VALUES (1, 0, 0, 0, 0);

-- An ordered lane. Only its head (lowest unacked seq) is ever claimable.
-- head_id, due_ms and runnable are kept incrementally by every verb so a
-- claim reads one index entry instead of scanning events or blocked flows.
CREATE TABLE flow (
    flow_id   INTEGER PRIMARY KEY,
    name      TEXT UNIQUE,                  -- NULL: the private flow of one unordered event
    weight    INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    next_seq  INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1),  -- seq the next event gets
    head_id   INTEGER,                      -- event.id of the head; NULL when every event is acked
                                            -- (no foreign key: kept by the store, checked by the tests)
    due_ms    INTEGER,                      -- when the head becomes claimable (next_at, or lease_until
                                            -- while inflight); NULL when no head or head quarantined
    runnable  INTEGER NOT NULL DEFAULT 0 CHECK (runnable IN (0, 1)),  -- 1: due_ms <= clock, in the rotation index
    pass      INTEGER NOT NULL CHECK (pass >= 0),  -- rotation position: claims go to the lowest
    turn      INTEGER NOT NULL CHECK (turn >= 0),  -- tie-break: who reached this position first
    CHECK (head_id IS NOT NULL OR due_ms IS NULL),
    CHECK (runnable = 0 OR due_ms IS NOT NULL)
) STRICT;
-- Flows whose head is waiting for a time (backoff, delay, live lease): promoted
-- to runnable when due. Quarantined and empty flows are in neither index.
CREATE INDEX flow_waiting ON flow (due_ms) WHERE runnable = 0 AND due_ms IS NOT NULL;
-- Flows whose head is claimable now, in rotation order.
CREATE INDEX flow_rotation ON flow (pass, turn) WHERE runnable = 1;

-- One unit of work. event_id, flow_id, seq and body never change.
CREATE TABLE event (
    id                INTEGER PRIMARY KEY,
    event_id          TEXT NOT NULL UNIQUE,
    flow_id           INTEGER NOT NULL REFERENCES flow (flow_id),
    seq               INTEGER NOT NULL CHECK (seq >= 1),     -- position in its flow, from 1, no gaps
    body              TEXT NOT NULL,                         -- canonical JSON
    state             TEXT NOT NULL DEFAULT 'ready'
                      CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined')),
    generation        INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),  -- fence: +1 per claim and redrive
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),    -- claims in this round
    lifetime_attempts INTEGER NOT NULL DEFAULT 0 CHECK (lifetime_attempts >= attempts),  -- never reset
    created_ms        INTEGER NOT NULL,
    next_at_ms        INTEGER,          -- ready: claimable from here (delay, backoff); else NULL
    lease_until_ms    INTEGER,          -- inflight: the lease ends here; else NULL
    owner             TEXT,             -- who holds (or last held) the lease
    reason            TEXT,             -- why it last retried or was quarantined
    due_ms            INTEGER NOT NULL, -- when it first became claimable (enqueue time + delay)
    first_claim_ms    INTEGER,          -- when it was first claimed; claim lag = first_claim_ms - due_ms
    settled_ms        INTEGER,          -- when it was acked
    UNIQUE (flow_id, seq),
    CHECK ((state = 'inflight') = (lease_until_ms IS NOT NULL)),
    CHECK ((state = 'ready') = (next_at_ms IS NOT NULL)),
    CHECK (state != 'inflight' OR generation >= 1),
    CHECK ((state = 'acked') = (settled_ms IS NOT NULL))
) STRICT;
-- The dead-letter view: quarantined events are few, and operators list them.
CREATE INDEX event_quarantined ON event (id) WHERE state = 'quarantined';

-- How many events are in each state, kept exact by the triggers below so
-- stats() never counts rows.
CREATE TABLE tally (
    state  TEXT PRIMARY KEY CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined')),
    n      INTEGER NOT NULL CHECK (n >= 0)
) STRICT, WITHOUT ROWID;
INSERT INTO tally (state, n) VALUES ('ready', 0), ('inflight', 0), ('acked', 0), ('quarantined', 0);

CREATE TRIGGER tally_insert AFTER INSERT ON event BEGIN
    UPDATE tally SET n = n + 1 WHERE state = new.state;
END;
CREATE TRIGGER tally_update AFTER UPDATE OF state ON event WHEN old.state != new.state BEGIN
    UPDATE tally SET n = n - 1 WHERE state = old.state;
    UPDATE tally SET n = n + 1 WHERE state = new.state;
END;
CREATE TRIGGER tally_delete AFTER DELETE ON event BEGIN
    UPDATE tally SET n = n - 1 WHERE state = old.state;
END;

-- Decisions that explain an event's history: retries, quarantines, expired
-- leases, redrives. Rows are only ever appended.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL,          -- not a foreign key: a misfired slot has no event
    action      TEXT NOT NULL CHECK (action IN ('retry', 'quarantine', 'expired', 'redrive', 'misfire')),
    reason      TEXT,
    actor       TEXT,                   -- who decided (redrive), or the lease owner
    generation  INTEGER,                -- the event's generation after the decision
    at_ms       INTEGER NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}'  -- JSON object: what else explains the decision
) STRICT;
CREATE INDEX audit_event ON audit (event_id, id);
