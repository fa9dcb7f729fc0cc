-- fairq PostgreSQL schema, version 3: the queue's clock is stored with it.

-- Which clock the queue runs at: 'server' (the database server's) or 'model'
-- (now_ms above). The open that creates the queue, or upgrades it to this
-- version, writes its own in the same transaction; an open asking for the
-- other one is refused, so no two processes measure one lease by two clocks.
ALTER TABLE queue_clock ADD COLUMN mode text NOT NULL DEFAULT 'server' CHECK (mode IN ('server', 'model'));
