"""A queue as an older fairq left it: made by this fairq, then taken back to
schema version `version` (what the later steps added is dropped and their
rows in fairq_schema deleted), so that an open upgrades it again. Only
the tables' steps are taken back: the functions stay this fairq's until an
open applies them again."""

from __future__ import annotations

from pgcluster import require_psycopg

psycopg = require_psycopg()

#: What each step added that a step applied again would refuse to add twice.
_UNDO = {
    2: ["DROP INDEX audit_misfire", "DROP INDEX flow_name_bytes"],
    3: ["ALTER TABLE queue_clock DROP COLUMN mode"],
    7: ["DROP INDEX head_tenant_rotation", "DROP INDEX head_tenant", "DROP INDEX head_rotation",
        "CREATE INDEX head_rotation ON head (pass, turn) WHERE runnable",
        "ALTER TABLE head DROP COLUMN tenant_id", "ALTER TABLE event DROP COLUMN tenant_id",
        "ALTER TABLE flow DROP COLUMN tenant_id", "DROP TABLE tenant",
        "ALTER TABLE audit DROP CONSTRAINT audit_action_check",
        "ALTER TABLE audit ADD CONSTRAINT audit_action_check CHECK (action IN ('retry', 'quarantine', "
        "'expired', 'redrive', 'misfire', 'clock_reset', 'policy_set'))"],
    8: ["DROP INDEX head_paused", "DROP INDEX head_waiting", "ALTER TABLE head DROP COLUMN paused",
        "CREATE INDEX head_waiting ON head (dispatch_ms) WHERE NOT runnable AND dispatch_ms IS NOT NULL",
        "ALTER TABLE flow DROP COLUMN paused", "ALTER TABLE flow DROP COLUMN pause_reason",
        "ALTER TABLE flow DROP COLUMN pause_actor", "ALTER TABLE flow DROP COLUMN paused_ms",
        "ALTER TABLE flow DROP COLUMN skipped", "ALTER TABLE event DROP CONSTRAINT event_state_known",
        "ALTER TABLE event DROP CONSTRAINT event_settled_when_final",
        "ALTER TABLE event ADD CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined'))",
        "ALTER TABLE event ADD CHECK ((state = 'acked') = (settled_ms IS NOT NULL))",
        "ALTER TABLE audit DROP CONSTRAINT audit_action_check",
        "ALTER TABLE audit ADD CONSTRAINT audit_action_check CHECK (action IN ('retry', 'quarantine', "
        "'expired', 'redrive', 'misfire', 'clock_reset', 'policy_set', 'set_tenant'))"],
    10: ["DROP INDEX event_kind", "ALTER TABLE event DROP COLUMN kind", "ALTER TABLE event DROP COLUMN max_attempts",
         "ALTER TABLE event DROP COLUMN timeout_ms", "ALTER TABLE event DROP COLUMN backoff"],
}


def back_to(url: str, version: int) -> None:
    """Take the queue at `url` back to schema `version`."""
    with psycopg.connect(url, autocommit=True) as conn:
        for step in sorted(_UNDO, reverse=True):
            if step > version:
                for sql in _UNDO[step]:
                    conn.execute(sql)
        conn.execute("DELETE FROM fairq_schema WHERE version > %s", (version,))
