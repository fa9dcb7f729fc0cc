-- Schema step 4 (user_version 3 -> 4): the audit log records clock resets
-- (action 'clock_reset', written by Queue.reset_clock, event_id ''). SQLite
-- cannot change a CHECK in place, so the audit table is rebuilt: its rows
-- are copied aside, the table is created again with the wider CHECK, and
-- the rows (with their ids) and the index come back. Nothing else changes.

CREATE TEMP TABLE audit_before_step_4 AS SELECT * FROM main.audit;
DROP TABLE main.audit;

-- Decisions that explain an event's history: retries, quarantines, expired
-- leases, redrives, misfired schedule slots; and clock resets, which concern
-- the whole queue. Rows are only ever appended.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL,          -- not a foreign key: a misfired slot has no event; '' for a clock reset
    action      TEXT NOT NULL CHECK (action = 'retry' OR action = 'quarantine' OR action = 'expired'
                                     OR action = 'redrive' OR action = 'misfire' OR action = 'clock_reset'),
    reason      TEXT,
    actor       TEXT,                   -- who decided (redrive), or the lease owner
    generation  INTEGER,                -- the event's generation after the decision
    at_ms       INTEGER NOT NULL,
    detail      TEXT NOT NULL DEFAULT '{}'  -- JSON object: what else explains the decision
) STRICT;

-- Every row comes back with its id, in id order.
INSERT INTO main.audit (id, event_id, action, reason, actor, generation, at_ms, detail)
SELECT id, event_id, action, reason, actor, generation, at_ms, detail FROM audit_before_step_4 ORDER BY id;
DROP TABLE audit_before_step_4;
CREATE INDEX audit_event ON audit (event_id, id);
