"""enqueue_many on PostgreSQL as one statement: the server-side function of
migrations/enqueue.sql (fairq_enqueue, since schema step 5) called in
autocommit, so the call is its own transaction and one round trip, BEGIN
and COMMIT included.

Used by PgTxn (store) when an enqueue runs on fairq's own connection; one
joined to an application's transaction (the outbox) calls the same
function inside that transaction (verbs.run), so every rule is written once.
What stays in
Python: each body's hash (rules.body_hash, which a tombstone keeps and
PostgreSQL cannot make), and the Conflict a repeat that does not match
raises: the function writes nothing and returns what is stored for the
batch's ids (with their tenants) and the batch's flows whose tenant is
fixed, and tenants.judge_batch (rules.check_repeat, and the tenants) says
which item conflicts and why, as it does on the Python path.

Crash points: `enqueue.before_commit` is passed before the statement is
sent, `enqueue.after_commit` once its answer has arrived (it committed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...kernel import rules
from ..backend import NewEvent
from ...errors import StoreError
from ...kernel.rows import StoredId, enqueued
from .tenants import StoredTenant, judge_batch
from ...types import Enqueued
from .txn import TxnCore, fold
from .verbs import committed, refused_time, run

# Store each new event at the end of its flow, repeats judged (fairq_enqueue):
# the ids already stored, then each new event, or a conflict that wrote nothing.
_ENQUEUE = ("SELECT * FROM fairq_enqueue(%(ids)s::text[], %(flows)s::text[], %(bodies)s::text[], "
            "%(hashes)s::bytea[], %(delays)s::bigint[], %(ats)s::bigint[], %(model)s, %(requested)s, "
            "%(explicit)s, %(fold)s, %(tenants)s::text[], %(kinds)s::text[], %(max_attempts)s::integer[], "
            "%(timeouts)s::bigint[], %(backoffs)s::text[])")


def call_enqueue(tx: TxnCore, items: Sequence[NewEvent], *, requested: tuple[int, bool],
                 in_txn: bool = False) -> list[Enqueued]:
    """Store each new event at the end of its flow in one statement;
    identical repeats collapse. Any conflict raises, and nothing was written."""
    rows = run(tx, "enqueue", _ENQUEUE, {
        "ids": [item.event_id for item in items], "flows": [item.flow for item in items],
        "bodies": [item.body for item in items], "hashes": [rules.body_hash(item.body) for item in items],
        "delays": [item.delay_ms for item in items], "ats": [item.at_ms for item in items],
        "model": not tx.server_clock, "requested": requested[0], "explicit": requested[1], "fold": fold(),
        "tenants": [item.tenant for item in items], **_own_policies(items)}, in_txn)
    refused_time(rows, requested, 6)
    stored = {event_id: StoredId(event_id, flow, int(seq), body if body is not None else bytes(hashed))
              for kind, event_id, flow, seq, body, hashed, _, _, _, _ in rows if kind == "stored"}
    if any(row[0] == "conflict" for row in rows):
        # The Conflict rules.check_repeat, a tenant or a kind raises.
        judge_batch(items, stored, {row[1]: StoredTenant(row[7], bool(row[8])) for row in rows if row[0] == "stored"},
                    {row[2]: row[7] for row in rows if row[0] == "flow"},
                    {row[1]: row[9] for row in rows if row[0] == "stored" and row[8]})
        raise StoreError("enqueue", "a repeat was refused on values rules.check_repeat accepts; nothing was written")
    committed("enqueue", in_txn)
    return enqueued(items, stored, {row[1]: int(row[3]) for row in rows if row[0] == "new"})


def _own_policies(items: Sequence[NewEvent]) -> dict[str, list[Any] | None]:
    """Each item's kind and own policy, as fairq_enqueue takes them: NULL
    arrays when no item has any (a batch without them sends nothing more)."""
    if not any(item.tasked for item in items):
        return {"kinds": None, "max_attempts": None, "timeouts": None, "backoffs": None}
    return {"kinds": [item.kind for item in items], "max_attempts": [item.max_attempts for item in items],
            "timeouts": [item.timeout_ms for item in items], "backoffs": [item.backoff for item in items]}
