-- fairq PostgreSQL schema, version 11: results, and waits for them.
-- Written to be applied again harmlessly, as an upgrade that finds this
-- version unrecorded does.

-- The result of an acked event (Queue.ack(result=...)), by the event's row id,
-- written in the ack's transaction (never in another). Only an acked event
-- has one; it never changes (an acked event is final), and it goes in the
-- transaction that purges its event.
CREATE TABLE IF NOT EXISTS event_result (
    event_pk    bigint PRIMARY KEY,  -- event.id of the acked event
    body        text NOT NULL,       -- canonical JSON
    created_ms  bigint NOT NULL      -- the ack's time (the queue's clock)
);

-- Who waits for an event to end (Queue.wait): one row per waiting call, kept
-- while it waits. A settle or a discard of an event named here notifies the
-- result channel with the event's id (fairq_tell_waiters); an event nobody
-- waits for costs its settle one look at this (empty) index and no NOTIFY.
-- Unlogged: a wait does not outlive the server; a row left by a process that
-- died only costs a spare notice, and the next wait clears rows that old.
CREATE UNLOGGED TABLE IF NOT EXISTS event_result_waiter (
    event_id  text NOT NULL,
    token     text NOT NULL,                       -- the waiting call's own
    since     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, token)
);
