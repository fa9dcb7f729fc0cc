-- Schema step 5 (user_version 4 -> 5): the retry policy is stored in the
-- file (table policy), so every process that opens it uses the same one; and
-- the audit log records its changes (action 'policy_set'). The policy row
-- starts with the defaults; the open that upgrades the file replaces them
-- with its own values, in the same transaction. The audit table is rebuilt
-- as in step 4 to widen its CHECK: rows keep their ids. Nothing else changes.

CREATE TEMP TABLE audit_before_step_5 AS SELECT * FROM main.audit;
DROP TABLE main.audit;

-- Decisions that explain an event's history: retries, quarantines, expired
-- leases, redrives, misfired schedule slots; and clock resets and policy
-- changes, which concern the whole queue. Rows are only ever appended.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL,          -- not a foreign key: a misfired slot has no event; '' for the whole queue
    action      TEXT NOT NULL CHECK (action = 'retry' OR action = 'quarantine' OR action = 'expired'
                                     OR action = 'redrive' OR action = 'misfire' OR action = 'clock_reset'
                                     OR action = 'policy_set'),
    reason      TEXT,
    actor       TEXT,                   -- who decided (redrive), or the lease owner
    generation  INTEGER,                -- the event's generation after the decision
    at_ms       INTEGER NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}'  -- JSON object: what else explains the decision
) STRICT;

-- Every row comes back with its id, in id order.
INSERT INTO main.audit (id, event_id, action, reason, actor, generation, at_ms, detail)
SELECT id, event_id, action, reason, actor, generation, at_ms, detail FROM audit_before_step_5 ORDER BY id;
DROP TABLE audit_before_step_5;
CREATE INDEX audit_event ON audit (event_id, id);

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
