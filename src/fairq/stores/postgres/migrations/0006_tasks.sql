-- fairq PostgreSQL schema, version 10: tasks. An event may carry a kind
-- (the name of the task that handles it) and its own retry policy: a retry
-- budget (max_attempts), a backoff and a handler timeout (timeout_ms), which
-- every process judges it by instead of the queue's stored policy. Every
-- existing event gets NULL in each, so it is judged as it was. Written to
-- be applied again harmlessly, as an upgrade that finds this version
-- unrecorded does.
--
-- The backoff is one column of JSON text ({"base","cap","factor","jitter"},
-- fairq.kernel.policy.backoff_text), as on SQLite: its four values are set
-- together or not at all, and are read only when a settle of that event
-- decides a retry (fairq_own_budget), so one nullable column keeps the row
-- narrow. No column added here is ever updated, and event_kind holds only
-- events that have a kind: claims and settles stay heap-only updates, and
-- a queue that never uses kinds writes no entry into it.

ALTER TABLE event ADD COLUMN IF NOT EXISTS kind text;
ALTER TABLE event ADD COLUMN IF NOT EXISTS max_attempts integer CHECK (max_attempts >= 1);
ALTER TABLE event ADD COLUMN IF NOT EXISTS timeout_ms bigint CHECK (timeout_ms >= 1);
ALTER TABLE event ADD COLUMN IF NOT EXISTS backoff text;
-- Events of each kind in enqueue order (events(kind=...)).
CREATE INDEX IF NOT EXISTS event_kind ON event (kind, id) WHERE kind IS NOT NULL;

-- The functions whose arguments or rows change with this version: the old
-- definitions are dropped, so only the new ones (which FUNCTIONS makes
-- again after the steps) exist.
DROP FUNCTION IF EXISTS fairq_claim(integer, text, boolean, bigint, boolean, bigint, integer, integer);
DROP FUNCTION IF EXISTS fairq_extend(text, bigint, boolean, bigint, boolean, bigint);
DROP FUNCTION IF EXISTS fairq_enqueue(text[], text[], text[], bytea[], bigint[], bigint[], boolean, bigint, boolean,
                                      integer, text[]);
