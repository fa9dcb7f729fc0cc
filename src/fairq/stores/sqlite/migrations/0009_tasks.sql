-- Schema step 9 (user_version 8 -> 9): tasks. An event may carry a kind (the
-- name of the task that handles it) and its own retry policy: a retry
-- budget (max_attempts), a backoff and a handler timeout (timeout_ms), which
-- every process judges it by instead of the queue's stored policy. NULL in
-- each for every event stored before, so each is judged as it was.
--
-- The backoff is one column of JSON text ({"base","cap","factor","jitter"},
-- fairq.kernel.policy.backoff_text), not four: its four values are set
-- together or not at all, and are read only when a retry of that event is
-- decided, so one nullable column keeps the row (and every claim's read of
-- it) narrow. max_attempts and timeout_ms are plain integers: a claim reads
-- them.
--
-- Columns are added, not rebuilt: every row keeps its id and every index
-- stays as it is. queue.sql lays them out as these statements write them,
-- so both files store the same text.

ALTER TABLE event ADD COLUMN kind TEXT;
ALTER TABLE event ADD COLUMN max_attempts INTEGER CHECK (max_attempts >= 1);
ALTER TABLE event ADD COLUMN timeout_ms INTEGER CHECK (timeout_ms >= 1);
ALTER TABLE event ADD COLUMN backoff TEXT;
-- Events of each kind in enqueue order (events(kind=...)); an event without
-- a kind has no entry, and no write ever changes an event's kind or id.
CREATE INDEX event_kind ON event (kind, id) WHERE kind IS NOT NULL;
