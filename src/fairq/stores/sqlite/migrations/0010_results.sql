-- Schema step 10 (user_version 9 -> 10): results. The value a handler returned
-- for an acked event is stored beside it, written in the ack's transaction
-- (never in another), and removed with its event by purge. Nothing else changes.

-- The result of an acked event, by the event's row id (event.id). Only an
-- acked event has one; it never changes (an acked event is final), and it
-- goes in the transaction that purges its event.
CREATE TABLE event_result (
    event_pk    INTEGER PRIMARY KEY,  -- event.id of the acked event
    body        TEXT NOT NULL,        -- canonical JSON
    created_ms  INTEGER NOT NULL      -- the ack's time (the queue's clock)
) STRICT;
