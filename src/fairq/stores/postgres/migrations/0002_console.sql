-- fairq PostgreSQL schema, version 2: indexes for the operator console.

-- A schedule's misfire records, newest slot first. A slot's instance id is
-- "{name}@{ISO slot time}", which sorts as time in byte order (COLLATE "C",
-- whatever the database's collation); the detail names the schedule, which
-- a prefix of the id alone could not (a name may hold "@").
CREATE INDEX audit_misfire ON audit ((detail::jsonb ->> 'schedule'), (event_id COLLATE "C"), id)
    WHERE action = 'misfire';

-- Flows in byte order of their names (COLLATE "C"), as SQLite lists them,
-- whatever the database's collation: the console pages through them by name.
CREATE INDEX flow_name_bytes ON flow ((name COLLATE "C"));
