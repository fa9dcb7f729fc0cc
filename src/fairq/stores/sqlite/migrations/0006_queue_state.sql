-- Schema step 6 (user_version 5 -> 6): the queue's one state row is named for
-- what it holds. Table clock held the stored clock and also the rotation
-- counters, the counts by state, the totals and the claim lag histogram; it
-- becomes table queue_state, its row and every value kept. Nothing else changes.

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
) STRICT;

-- The one row comes over as it was.
INSERT INTO main.queue_state (
    id, now_ms, vtime, tail, turn, ready_n, inflight_n, acked_n, quarantined_n,
    enqueued_total, claimed_total, expired_total, acked_total, retried_total,
    quarantined_total, redriven_total, claim_lag)
SELECT
    id, now_ms, vtime, tail, turn, ready_n, inflight_n, acked_n, quarantined_n,
    enqueued_total, claimed_total, expired_total, acked_total, retried_total,
    quarantined_total, redriven_total, claim_lag
FROM main.clock;
DROP TABLE main.clock;
