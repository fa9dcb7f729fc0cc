-- Schema step 2 (user_version 1 -> 2): periodic schedules.

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
