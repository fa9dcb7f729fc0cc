-- Schema step 3 (user_version 2 -> 3): retention. `purge` replaces old acked events by
-- tombstones, so a re-enqueue of a purged id still answers existing or
-- conflict; tombstones older than the dedup window go entirely.
-- Self-contained: it only adds two tables and an index.

-- What is left of a purged acked event: enough to judge a repeat enqueue.
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
    purged_total  INTEGER NOT NULL CHECK (purged_total >= 0)   -- acked events purge removed; only grows
) STRICT;
INSERT INTO retention VALUES (1, 0, 0);
