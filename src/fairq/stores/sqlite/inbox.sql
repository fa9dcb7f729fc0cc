-- fairq inbox schema: receiver-side receipts. These tables live in the
-- receiver's own database, beside the tables its effects write, so a receipt
-- and its effect commit together. Created with IF NOT EXISTS: opening an
-- inbox never disturbs the application's own tables.

-- Which version of these tables the file holds.
CREATE TABLE IF NOT EXISTS fairq_inbox_meta (
    key    TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
) STRICT;

-- One row per accepted delivery. event_id, flow, seq and body are what the
-- sender sent; a later delivery must match them exactly to be a duplicate.
CREATE TABLE IF NOT EXISTS fairq_receipt (
    event_id     TEXT PRIMARY KEY,
    flow         TEXT,                          -- NULL: unordered, no sequence check
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    body         TEXT NOT NULL,                 -- canonical JSON
    received_ms  INTEGER NOT NULL,
    UNIQUE (flow, seq)                          -- one event per position of a flow
) STRICT;
