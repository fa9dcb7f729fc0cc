-- The receiving end of a relay (fairq.Inbox): receipts beside the
-- application's own tables, so a receipt and its effect commit together.
-- Created with schema step 1, or alone by an Inbox opened where no queue is
-- (IF NOT EXISTS: whichever comes first creates it; the other finds it).
CREATE TABLE IF NOT EXISTS fairq_receipt (
    event_id     text PRIMARY KEY,
    flow         text,
    seq          bigint NOT NULL CHECK (seq >= 1),
    body         text NOT NULL,
    received_ms  bigint NOT NULL,
    UNIQUE (flow, seq)
);
